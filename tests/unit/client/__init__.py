"""The Python client's distribution (client/): its sync modules generated from the async ones."""
