"""keras_bert_zoo.weights."""
