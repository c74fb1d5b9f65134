"""keras_bert_zoo.text."""
