"""Training: a run config in, a run directory out (the resolved config.toml, metrics.jsonl,
checkpoints/step-NNNNNN/, and the best/ and last/ model directories that `transformer.model_dir`
writes). `trainer.train(config, out)` is the entry; `loop.py` reads top to bottom.

It stands on config/ (the run's settings), data/ (texts, tokenizers, batches), model/ (what is
trained), runtime/ (precision and attention kernel measured on this machine), evaluation/ (the
validation metrics) and model_dir; it imports nothing from decoding/ (validation decodes through
evaluation/).

    trainer.py      train(): check the request, settle precision, prepare the objective, run
    loop.py         the loop (§5): one step, then logging, validation, checkpoints, until the budget
    objectives/     what a run learns, one module per objective behind one interface (base.py)
    corpora.py      the training data as the loop sees it: corpora prepared, batches, mixtures
    data_files.py   which files a run reads (training sources, validation files)
    tokenizing.py   a run's tokenizers: trained and cached, loaded, compared
    validation.py   validation BLEU during training (greedy decoding of a fixed sample)
    loss.py         label-smoothed cross entropy (§5.4)
    schedule.py     learning-rate schedules as pure functions of the step
    dropout.py      late dropout
    checkpoint.py   atomic checkpoints, resume, keep the last K, averaging (§6.1)
    distributed.py  data-parallel training under torchrun
    sizing.py       [sizing] auto: which model shape fits a time budget on this machine
    progress.py     what a run says as it goes: progress bar, log lines, metrics.jsonl
"""
