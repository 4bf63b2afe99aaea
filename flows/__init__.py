"""Prefect flows, tasks, deployments and the `subrun` command line (the only Prefect users)."""
