"""Kubernetes plumbing shared by the coordinator and the agents (no fedspread logic)."""
