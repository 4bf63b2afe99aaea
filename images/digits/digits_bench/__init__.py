"""Handwritten digits through LoadGen: scikit-learn's digits, an SVM, 50,000 samples."""
