"""keras_bert_zoo.utils."""
