"""keras_bert_zoo.metrics."""
