"""The evaluation pass: a run's settings resolved once (`run_config`), planned (`runner`), carried out on one
engine beside the frame loading (`execute`, `pipeline`), swept over frame budgets (`sweep`), judged by a second model
(`judge_pass`), launched per shard and device (`launcher`), checked before it starts (`preflight`)."""
