"""What the harness knows about resnet50_v1.onnx: file name, output, label offset."""

MODEL_FILE = "resnet50_v1.onnx"
OUTPUT = "ArgMax:0"  # the class index; softmax_tensor:0 holds the probabilities
LABEL_OFFSET = -1  # 1,001 classes with 0 as "background"; ImageNet labels start at 0
EXPECTED_INPUT = [3, 224, 224]  # after the batch dimension, NCHW
