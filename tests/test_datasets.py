"""The written directory loads with Hugging Face `datasets`, one config at a time."""
import pytest

datasets = pytest.importorskip("datasets", reason="pip install 'kernelstrain[dev]' for the datasets load test")


@pytest.mark.parametrize("config, split, field", [
    ("episodes", "train", "steps"), ("sft_multiturn", "train", "messages"),
    ("sft_steps", "train", "messages"), ("holdout", "test", "prompt"),
])
def test_load_dataset_each_config(small_dataset, config, split, field, tmp_path):
    ds = datasets.load_dataset(str(small_dataset), config, split=split, cache_dir=str(tmp_path / "cache"))
    assert len(ds) > 0 and field in ds.column_names
    if config == "sft_steps":
        roles = [m["role"] for m in ds[0]["messages"]]
        assert roles == ["system", "user", "assistant"]
