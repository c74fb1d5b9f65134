"""keras_bert_zoo.training."""
