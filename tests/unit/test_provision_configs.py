"""Config profiles shipped with dbregress: rendering, overrides, unknown names."""

from __future__ import annotations

import pytest

from dbregress import configs
from dbregress.engines.base import Sizes
from dbregress.model.errors import ConfigRejected

SIZES = Sizes(cache_mb=256, wal_mb=2048)


def test_shipped_profiles() -> None:
    assert configs.profiles("postgres") == ["ci", "default"]


def test_default_profile_sizes_and_durability() -> None:
    settings = configs.render("postgres", "default", SIZES, {})
    assert settings["shared_buffers"] == "256MB"
    assert settings["max_wal_size"] == "2048MB"
    assert (settings["fsync"], settings["synchronous_commit"]) == ("on", "on")
    assert settings["huge_pages"] == "off"


def test_ci_profile_is_default_without_durability() -> None:
    default = configs.render("postgres", "default", SIZES, {})
    ci = configs.render("postgres", "ci", SIZES, {})
    assert (ci["fsync"], ci["synchronous_commit"]) == ("off", "off")
    differing = {k for k in default if default[k] != ci[k]}
    assert differing == {"fsync", "synchronous_commit"}


def test_overrides_replace_and_extend() -> None:
    settings = configs.render("postgres", "default", SIZES, {"fsync": "off", "work_mem": "64MB"})
    assert settings["fsync"] == "off"
    assert settings["work_mem"] == "64MB"


def test_unknown_profile_lists_shipped() -> None:
    with pytest.raises(ConfigRejected, match="'nope'; shipped: ci, default"):
        configs.render("postgres", "nope", SIZES, {})


def test_parse_settings() -> None:
    text = "# comment\nshared_buffers = 1GB  # trailing\n\nlisten_addresses = ''\nx='a b'\n"
    assert configs.parse_settings(text) == {
        "shared_buffers": "1GB",
        "listen_addresses": "",
        "x": "a b",
    }
    with pytest.raises(ValueError, match="line 1"):
        configs.parse_settings("shared_buffers 1GB")
