"""A small byte-level BPE tokenizer trained on the project's own text, in Hugging Face format.

It follows the conventions of Qwen2.5 so the CPU and GPU scales share one code path: digits
are split one per token, special tokens ``<|endoftext|>`` (padding), ``<|im_start|>`` and
``<|im_end|>`` (end of a turn, the EOS of chat generation), and a ChatML chat template.
Byte-level BPE round-trips any text exactly, including characters never seen in training.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from ictrepro.errors import ConfigError

PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (PAD_TOKEN, IM_START, IM_END)

#: ChatML without a default system prompt (Qwen2.5's template adds one; a model trained
#: from scratch has no use for it). Every message ends with <|im_end|>, which is the EOS.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def train_tokenizer(texts: Iterable[str], *, vocab_size: int) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer of ``vocab_size`` entries on ``texts``.

    Training is deterministic for the same texts in the same order.
    """
    min_size = 256 + len(SPECIAL_TOKENS)
    if vocab_size < min_size:
        raise ConfigError(
            f"vocab_size must be at least {min_size} (bytes + specials), got {vocab_size}"
        )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=PAD_TOKEN,
        additional_special_tokens=[IM_START],
        chat_template=CHAT_TEMPLATE,
        padding_side="left",  # generation pads on the left; training code pads itself
        clean_up_tokenization_spaces=False,
        model_max_length=4096,
    )
