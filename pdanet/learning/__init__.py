"""What to do with compiled networks when learning: initialise a learner from one
(`initialize`, `LearnerRNN`), build machine-labelled data (`dataset`), train (`fit`), measure
(`metrics`), and the initialisation experiment (`init_experiment`)."""

from pdanet.learning import metrics
from pdanet.learning.data import (
    SequenceDataset,
    dataset,
    label,
    pair_dataset,
    train_test_split_by_length,
)
from pdanet.learning.init import (
    LearnerRNN,
    WeightTolerance,
    initialize,
    stack_learner,
    weight_tolerance,
)
from pdanet.learning.paper_init import paper_learner
from pdanet.learning.train import evaluate, fit, format_rows, init_experiment, masked_loss
from pdanet.learning.trained import as_network

__all__ = [
    "LearnerRNN",
    "SequenceDataset",
    "WeightTolerance",
    "as_network",
    "dataset",
    "evaluate",
    "fit",
    "format_rows",
    "init_experiment",
    "initialize",
    "label",
    "masked_loss",
    "metrics",
    "pair_dataset",
    "paper_learner",
    "stack_learner",
    "train_test_split_by_length",
    "weight_tolerance",
]
