"""Lab layer: inventory models (hosts.yaml), the Host transports, Docker provisioning, errors."""
