"""ModelConfig.reads_target says whether a run of the model takes a target; Trace.target_tokens gives it back."""

import pytest

import explorer
from explorer import ConfigError, ModelConfig
from explorer.config import ARCHS

SOURCE, TARGET = "the cat sat", "le chat"
SMALL = {"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 8}


@pytest.mark.parametrize("arch", ARCHS)
def test_reads_target_exactly_when_a_decoder_reads_a_target_beside_the_source(arch):
    cfg = ModelConfig(arch=arch, **SMALL)
    assert cfg.reads_target is (arch == "encoder-decoder")
    if cfg.reads_target:
        trace = explorer.run(cfg, SOURCE, TARGET)
        assert len(trace.stacks) == 2 and trace.cross_attention is not None  # the decoder reads the encoder's output
        assert trace.target_tokens == ("le", "chat")
    else:
        with pytest.raises(ConfigError, match="Only an encoder-decoder takes a target"):
            explorer.run(cfg, SOURCE, TARGET)
        trace = explorer.run(cfg, SOURCE)
        assert len(trace.stacks) == 1 and trace.target_tokens is None
