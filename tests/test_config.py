"""Configuration: layering, per-profile overrides, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import AwEnv

from agentwrap.config import load_config
from agentwrap.errors import ConfigError
from agentwrap.paths import Paths


def paths_in(tmp_path: Path) -> Paths:
    env = {"HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    return Paths.from_env(env).ensure()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_defaults_without_files(tmp_path: Path) -> None:
    cfg = load_config(paths_in(tmp_path), tmp_path)
    assert cfg.run.backend == "tmux" and not cfg.run.trust_folder
    assert cfg.delivery.backoff_s == (1.0, 2.0, 5.0, 10.0, 30.0)
    assert cfg.delivery.fallback_after == 3 and cfg.limits.rate_per_minute == 10
    assert cfg.sources == ()


def test_project_file_overrides_user_file_and_profiles_override_both(tmp_path: Path) -> None:
    paths = paths_in(tmp_path)
    write(paths.config_file, "[delivery]\nrequire_ack = true\nack_timeout_s = 7\n"
          "[profiles.codex.delivery]\nack_timeout_s = 10\n")
    project = tmp_path / "proj" / "sub"
    (tmp_path / "proj" / ".git").mkdir(parents=True)
    write(tmp_path / "proj" / ".agentwrap.toml", "[delivery]\nack_timeout_s = 3\nbackoff_s = [0.5, 1]\n")
    project.mkdir()
    cfg = load_config(paths, project)
    assert cfg.delivery.require_ack is True  # from the user file
    assert cfg.delivery.ack_timeout_s == 3.0  # the project file wins
    assert cfg.delivery.backoff_s == (0.5, 1.0)
    assert cfg.for_profile("codex").delivery.ack_timeout_s == 10.0
    assert cfg.for_profile("claude").delivery.ack_timeout_s == 3.0
    assert len(cfg.sources) == 2


def test_project_search_stops_at_the_repository_root(tmp_path: Path) -> None:
    write(tmp_path / ".agentwrap.toml", "[run]\nbackend = \"pty\"\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    assert load_config(paths_in(tmp_path / "h"), repo).run.backend == "tmux"


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("[delivery]\nbackof_s = [1]\n", "delivery.backof_s"),
        ("[deliveri]\nrequire_ack = true\n", "[deliveri]"),
        ("[delivery]\nrequire_ack = \"yes\"\n", "delivery.require_ack"),
        ("[delivery]\nfallback_after = -1\n", "delivery.fallback_after"),
        ("[limits]\nrate_per_minute = 1.5\n", "limits.rate_per_minute"),
        ("[run]\nbackend = \"screen\"\n", "run.backend"),
        ("[run]\nrelay = \"turbo\"\n", "run.relay"),
        ("[run]\nidle_tick_s = 0\n", "run.idle_tick_s"),
        ("[profiles.codex.delivery]\nack_timeout = 3\n", "profiles.codex.delivery.ack_timeout"),
        ("[delivery\n", "not valid TOML"),
    ],
)
def test_bad_config_is_an_error_naming_the_file_and_key(
    tmp_path: Path, text: str, names: str
) -> None:
    paths = paths_in(tmp_path)
    write(paths.config_file, text)
    with pytest.raises(ConfigError) as err:
        load_config(paths, tmp_path)
    assert names in err.value.message
    assert str(paths.config_file) in err.value.message
    if names != "not valid TOML":
        assert err.value.hint


def test_config_cache_parses_again_only_when_a_file_changed(aw: AwEnv) -> None:
    from agentwrap.config import ConfigCache

    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    aw.paths.config_file.write_text("[limits]\nrate_per_minute = 7\n", encoding="utf-8")
    cache = ConfigCache(aw.paths)
    first = cache.load(aw.project)
    assert first.limits.rate_per_minute == 7
    assert cache.load(aw.project) is first  # nothing changed: not parsed again
    aw.paths.config_file.write_text("[limits]\nrate_per_minute = 9\n", encoding="utf-8")
    assert cache.load(aw.project).limits.rate_per_minute == 9  # same size, new content
    (aw.project / ".agentwrap.toml").write_text("[limits]\nrate_per_minute = 3\n",
                                                encoding="utf-8")
    assert cache.load(aw.project).limits.rate_per_minute == 3  # a project file appeared
    (aw.project / ".agentwrap.toml").unlink()
    assert cache.load(aw.project).limits.rate_per_minute == 9  # and went away
