"""Kubernetes I/O: configuration, the API client, and MiniCluster operations."""
