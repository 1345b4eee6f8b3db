"""Deployment files: the container image's and the Kubernetes manifests' consistency with the code."""
