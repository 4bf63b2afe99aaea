"""MLPerf ResNet50-v1.5 on onnxruntime: the reference preprocessing, model and accuracy format."""
