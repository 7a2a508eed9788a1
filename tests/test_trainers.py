"""The rows trainers take as they are: TRL's SFTTrainer trains on sft_prompt_completion with
the loss on the completion only (two optimizer steps of a tiny randomly initialised Llama, a
BPE tokenizer trained here on the rows, CPU, nothing downloaded)."""
import math

import pytest

datasets = pytest.importorskip("datasets")
torch = pytest.importorskip("torch", reason="torch is installed by .ci/run (extra exec)")
transformers = pytest.importorskip("transformers", reason="extra dev: transformers")
trl = pytest.importorskip("trl", reason="extra dev: trl")
tokenizers = pytest.importorskip("tokenizers", reason="installed with transformers")

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SPECIAL = ["<|im_start|>", "<|im_end|>", "<pad>"]


def _tokenizer(texts):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=2000, special_tokens=SPECIAL,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<pad>",
                                                chat_template=CHATML)


def test_sft_trainer_two_steps_on_prompt_completion_rows(small_dataset, tmp_path):
    rows = datasets.load_dataset(str(small_dataset), "sft_prompt_completion", split="train")
    assert set(rows.column_names) >= {"prompt", "completion"}
    short = sorted(range(len(rows)), key=lambda i: len(rows[i]["prompt"][1]["content"]))[:4]
    train = rows.select(short).select_columns(["prompt", "completion"])
    tokenizer = _tokenizer(m["content"] for r in train for m in r["prompt"] + r["completion"])
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                      max_position_embeddings=8192, pad_token_id=tokenizer.pad_token_id)
    model = transformers.LlamaForCausalLM(config)
    before = [p.detach().clone() for p in model.parameters()]
    args = trl.SFTConfig(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=2, learning_rate=1e-3,
                         completion_only_loss=True, max_length=8192, logging_steps=1, save_strategy="no",
                         report_to=[], use_cpu=True, dataloader_num_workers=0)
    trainer = trl.SFTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    row = trainer.train_dataset[0]
    # the loss sees the completion (the kernel and the template's end of turn), not the prompt
    trained = [t for t in row["labels"] if t != -100]
    answer = tokenizer(train[0]["completion"][0]["content"])["input_ids"]
    assert len(row["labels"]) == len(row["input_ids"]) <= 8192 and 0 < len(trained) < len(row["input_ids"])
    assert len(answer) <= len(trained) <= len(answer) + 3
    assert row["input_ids"][-len(trained):] == trained
    trainer.train()
    assert trainer.state.global_step == 2
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 2 and all(math.isfinite(x) and x > 0 for x in losses)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
