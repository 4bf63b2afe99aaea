"""ctr-mini: a small click-through-rate model trained on generated data, logged with mllog."""
