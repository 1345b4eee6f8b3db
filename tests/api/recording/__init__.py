"""Recordings and trajectories."""
