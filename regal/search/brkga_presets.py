"""Named BRKGA settings for `regal.optimize --brkga_preset NAME` and `regal.train`
(`--config.brkga_preset=NAME`).

  default  Goncalves & Resende's ranges as REGAL used them (population ~ genes, capped at 200,
           20% elites, 15% mutants, rho 0.7, uniform mutants), restarted on stagnation:
           `brkga_search.default_brkga_params`;
           its search settings (decoder, local improvement: `SEARCH_KEYS`) are the best of
           `python -m regal_experiments.sweep --sweep search_tuning --save_preset default`, tuned
           on training graphs only and saved with their provenance; but the WC model's
           decoder, `consumer` (`regal.scoring.consumer_transfers`), set by hand from
           `python -m regal_experiments.search_ab --variant decoder=consumer --seeds 50-69`
           (provenance `wc_decoder`): a sweep that saves the default rewrites it, so its grid
           should hold that decoder.
  others   written by `python -m regal_experiments.sweep --sweep brkga_tuning --save_preset NAME`
           into `brkga_presets.json` beside this file: the best setting of the sweep (REGAL
           5.2's tuned BRKGA), with where it came from (sweep file, command, date, score).
           Search settings they lack come from the default preset.

A preset holds fractions, not counts, so it applies to any graph; population sizes are
absolute (as in the paper's grid).
"""
from __future__ import annotations

import json
import os
from typing import Any

import regal_brkga as brkga
from regal_datasets import atomic, errors
from regal.search import brkga_search

PRESETS_FILE = os.path.join(os.path.dirname(__file__), "brkga_presets.json")
SETTING_KEYS = ("population_size", "elite_fraction", "mutant_fraction", "num_populations", "rho",
                "mutant_alpha", "mutant_beta")
DEFAULT = "default"
# Search settings (`regal.search.SearchSettings`): the decoder and its bias, local improvement
# (the keys `local_moves.Memetic` declares for its fields).
SEARCH_KEYS = ("decoder", "bias", *brkga_search.Memetic.keys())


def load_all(path: str | None = None) -> dict[str, dict[str, Any]]:
  path = path or PRESETS_FILE
  if not os.path.exists(path):
    return {}
  try:
    with open(path) as f:
      presets = json.load(f)
  except (OSError, json.JSONDecodeError) as error:
    raise errors.ConfigError(f"cannot read BRKGA presets {path}: {error}") from None
  if not isinstance(presets, dict):
    raise errors.ConfigError(f"BRKGA presets {path}: expected a JSON object")
  return presets


def names(path: str | None = None) -> list[str]:
  return [DEFAULT] + sorted(set(load_all(path)) - {DEFAULT})


def search_values(name: str, path: str | None = None) -> dict[str, Any]:
  """The preset's search settings (SEARCH_KEYS); keys it lacks come from the default preset,
  and the default's from `regal.search.SearchSettings`."""
  presets = load_all(path)
  if name not in ("", DEFAULT) and name not in presets:
    raise errors.ConfigError(f"unknown BRKGA preset {name!r}; known: {', '.join(names(path))}")
  values = builtin_search_values()
  for source in (DEFAULT, name or DEFAULT):
    stored = presets.get(source, {}).get("setting", {})
    values.update({k: stored[k] for k in SEARCH_KEYS if k in stored})
  return values


def builtin_search_values() -> dict[str, Any]:
  """`regal.search.SearchSettings`' own values, one per SEARCH_KEYS key (their types are
  the settings' types)."""
  builtin = brkga_search.SearchSettings()
  return {"decoder": builtin.decoder, "bias": builtin.bias, **builtin.memetic.values()}


def search_settings(name: str, path: str | None = None, decoder: str | None = None,
                    model: str | None = None, overrides: dict[str, Any] | None = None):
  """`regal.search.SearchSettings` of a preset for a performance model (`decoder` overrides
  its decoder, `overrides` any SEARCH_KEYS value). A preset's value is one for every model,
  or one per model ({"doppler": "list", ...}; a model it does not name gets the built-in
  value)."""
  unknown = sorted(set(overrides or {}) - set(SEARCH_KEYS))
  if unknown:
    raise errors.ConfigError(f"unknown search settings {', '.join(unknown)}; known: "
                             f"{', '.join(SEARCH_KEYS)}")
  builtin = builtin_search_values()  # For models a preset omits.
  values = {k: (v.get(model, builtin[k]) if isinstance(v, dict) else v)
            for k, v in search_values(name, path).items()}
  values.update(overrides or {})
  try:
    return settings_from_values({**values, "decoder": decoder or values["decoder"]})
  except (TypeError, ValueError) as error:
    raise errors.ConfigError(f"BRKGA preset {name or DEFAULT!r}: bad search setting: "
                             f"{error}") from None


def settings_from_values(values: dict[str, Any]):
  """`regal.search.SearchSettings` (validated) from one value per SEARCH_KEYS key."""
  return brkga_search.SearchSettings(
      decoder=str(values["decoder"]), bias=float(values["bias"]),
      memetic=brkga_search.Memetic.from_values(values)).validate()


def setting(name: str, path: str | None = None) -> dict[str, Any] | None:
  """The preset's setting (SETTING_KEYS), None for the default."""
  if name in ("", DEFAULT):
    return None  # The default's BRKGA parameters: Goncalves & Resende's, sized per graph.
  presets = load_all(path)
  if name not in presets:
    raise errors.ConfigError(f"unknown BRKGA preset {name!r}; known: {', '.join(names(path))}")
  entry = presets[name]
  missing = [k for k in SETTING_KEYS if k not in entry.get("setting", {})]
  if missing:
    raise errors.ConfigError(f"BRKGA preset {name!r} lacks {', '.join(missing)}")
  return {k: entry["setting"][k] for k in SETTING_KEYS}


def to_params(values: dict[str, Any]) -> brkga.Params:
  """BRKGA parameters of a setting (a sweep trial's or a preset's), scalar mutant Betas."""
  population = int(values["population_size"])
  num_populations = int(values["num_populations"])
  try:
    return brkga.Params(
        population_size=population,
        num_elites=max(1, int(round(values["elite_fraction"] * population))),
        num_mutants=int(round(values["mutant_fraction"] * population)),
        num_populations=num_populations,
        exchange_interval=20 if num_populations > 1 else 0,
        rho=float(values["rho"]), mutant_alpha=float(values["mutant_alpha"]),
        mutant_beta=float(values["mutant_beta"])).validate()
  except ValueError as error:
    raise errors.ConfigError(f"BRKGA setting {values}: {error}") from None


def params(name: str, num_genes: int, path: str | None = None,
           evals: int | None = None,
           restarts: tuple[int, str] = brkga_search.DEFAULT_RESTARTS
           ) -> brkga.Params:
  """The preset's BRKGA parameters; the default preset's are Goncalves & Resende's for
  `num_genes` genes and a budget of `evals`, restarting as `restarts` says
  (`brkga_search.restarts_for`)."""
  values = setting(name, path)
  return (brkga_search.default_brkga_params(num_genes, evals=evals, restarts=restarts)
          if values is None else to_params(values))


def save(name: str, values: dict[str, Any], provenance: dict[str, Any],
         path: str | None = None) -> None:
  """Saves a sweep's best setting. The default preset holds search settings only (its BRKGA
  parameters are Goncalves & Resende's); other presets hold BRKGA parameters and, optionally,
  search settings."""
  if name == "":
    raise errors.ConfigError("the preset name '' is reserved")
  search_part = {k: values[k] for k in SEARCH_KEYS if k in values}
  if name == DEFAULT:
    if not search_part:
      raise errors.ConfigError("the default preset is reserved for search settings "
                               f"({', '.join(SEARCH_KEYS)})")
    setting = search_part
  else:
    to_params(values)  # Refuse a setting that does not make valid parameters.
    setting = {**{k: values[k] for k in SETTING_KEYS}, **search_part}
  presets = load_all(path)
  presets[name] = {"setting": setting, "provenance": provenance}
  atomic.write_text(path or PRESETS_FILE, json.dumps(presets, indent=1, sort_keys=True) + "\n")
