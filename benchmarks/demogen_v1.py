"""Version 1 of the `mnist1d-demogen` recipe (4000 training examples, 60 epochs with lr steps at 40 and 50,
dropout {0, 0.2, 0.5}, weight decay {0, 1e-3, 5e-3}, stronger augmentation, no stopping rule) as overrides of
the shipped recipe, so that the training and margin benchmarks keep timing the workload their targets were
set on."""
DEMOGEN_V1 = {
    "dataset.num_samples": 5000, "dataset.train_split": 0.8,
    "grid.dropout": [0.0, 0.2, 0.5], "grid.weight_decay": [0.0, 0.001, 0.005],
    "train.epochs": 60, "train.lr_milestones": [40, 50], "train.stop": None,
    "train.aug_shift": 4, "train.aug_noise": 0.1,
}
