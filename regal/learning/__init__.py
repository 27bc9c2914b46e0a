"""REGAL's learning: graph features (`features`), the GNN policy of per-gene Beta
distributions (`policy`), REINFORCE and imitation (`reinforce`), rollouts of the one search (`rollout`) on Ray actors
(`rollout_pool`), training (`train_lib`, configs in `configs/`), checkpoints (`checkpoint`),
and running a trained policy on a new graph (`policy_runner`)."""
