"""keras_bert_zoo.data."""
