"""keras_bert_zoo.metrics: GLUE, SQuAD (the official scripts' rules) and tagging scores."""

from keras_bert_zoo.metrics.glue import glue_metrics
from keras_bert_zoo.metrics.glue_dev_metrics import GlueDevMetrics
from keras_bert_zoo.metrics.squad import squad_v1_metrics, squad_v2_metrics
from keras_bert_zoo.metrics.tagging import entity_scores, tagging_metrics

__all__ = ["GlueDevMetrics", "entity_scores", "glue_metrics", "squad_v1_metrics", "squad_v2_metrics",
           "tagging_metrics"]
