"""The version matrix (data/version_matrix.yaml, infra/version_matrix.py): every row cites its sources,
the config refuses pins outside it naming the key and the nearest row, known-bad pairs name their issue."""

from __future__ import annotations

import copy

import pytest

from infra.config import ConfigError, parse
from infra.version_matrix import Pins, check, gke_in_row, load, parse_version, report, satisfies

GIB = "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib"


def config(**overrides):
    raw = {"project": "my-gcp-project", "region": "us-east1", "zone": "us-east1-b", "flavour": "b200"}
    raw.update(overrides)
    return parse(raw, "dev")


def refusal(**overrides) -> str:
    with pytest.raises(ConfigError) as err:
        config(**overrides)
    message = str(err.value)
    assert "\n" not in message and "Traceback" not in message
    return message


# ----------------------------------------------------------------------------- the data


def test_every_row_cites_a_source_for_each_version_or_says_why_not():
    matrix = load()
    assert matrix["rows"] and matrix["knownBad"]
    for row in matrix["rows"]:
        for part in ("gpuDriverVersion", "gib", "nemoRl", "kuberayChart"):
            assert str(row[part].get("source", "")).strip(), f"{row['id']}: {part} has no source"
        for part in ("gke", "gpuDriverVersion", "gib", "nccl"):
            if row[part].get("unverified"):
                assert len(str(row[part].get("why", ""))) > 30, f"{row['id']}: {part} unverified without why"
        assert row["nccl"]["from"] in ("image", "gib")
        if row["nccl"]["from"] == "gib" and not row["nccl"].get("version"):
            assert row["nccl"]["unverified"], row["id"]


def test_every_known_bad_pair_names_its_upstream_issue_and_claim():
    for rule in load()["knownBad"]:
        assert rule["issue"].startswith("https://github.com/") and len(rule["claim"]) > 60, rule["id"]
        assert rule["effect"] in ("refuse", "caution", "note") and rule["key"], rule["id"]


def test_the_rows_nemo_rl_images_are_the_recipes_images_with_their_ray_and_every_image_has_a_row():
    from workloads.recipes import IMAGES

    seen = set()
    for row in load()["rows"]:
        images = {k: v for k, v in row["nemoRl"].items() if k != "source"}
        assert {tag: v["ray"] for tag, v in images.items()} == {t: IMAGES[t].ray_version for t in images}, row["id"]
        seen |= set(images)
    assert seen == set(IMAGES)


def test_the_rows_pins_are_the_configs_defaults():
    cfg = config()
    row = load()["rows"][0]
    assert f"{row['gib']['image']}:{row['gib']['tag']}" == cfg.ray.nccl_installer_image
    assert str(row["kuberayChart"]["version"]) == cfg.ray.chart_version


# ----------------------------------------------------------------------------- versions


def test_versions_compare_by_their_numbers_and_a_short_bound_covers_its_minor():
    assert parse_version("1.33.2-gke.1111000") == (1, 33, 2, 1111000) and parse_version("v1.1.1") == (1, 1, 1)
    assert satisfies("v1.1.1", "<1.1.2") and not satisfies("v1.1.2", "<1.1.2")
    assert satisfies("2.27.5+cuda12.9", "<2.28") and not satisfies("2.28.9", "<2.28")
    assert satisfies("2.30.7", ">=2.30.4") and not satisfies("2.30.3", ">=2.30.4")
    row = load()["rows"][0]
    assert gke_in_row("1.35.9-gke.100", row) and not gke_in_row("1.36.0-gke.1", row)
    assert not gke_in_row("1.33.1-gke.9", row) and gke_in_row("1.33.2-gke.1111000", row)


# ----------------------------------------------------------------------------- the config


@pytest.mark.parametrize("stack", ["dev", "b200", "h200", "autopilot"])
def test_every_example_stack_matches_a_row(stack):
    from conftest import stack_config

    from infra.config import namespaced

    raw, _ = stack_config(stack)
    rep = report(parse(namespaced(raw), stack).version_pins)
    assert rep["row"] and not rep["outside"], rep
    assert stack in next(r for r in load()["rows"] if r["id"] == rep["row"])["covers"]["stacks"]


def test_an_installer_image_outside_the_matrix_is_refused_naming_the_key_and_the_nearest_row():
    message = refusal(ray={"ncclInstallerImage": f"{GIB}:v1.0.5"})
    assert message.startswith("nemo-rl-gke:ray.ncclInstallerImage: ")
    assert f"the nearest tested row standard-gib-v1.1.1 has {GIB}:v1.1.1" in message
    assert "allowUntestedVersions: true" in message


def test_a_chart_and_a_gke_version_outside_the_matrix_are_refused_by_their_keys():
    assert refusal(ray={"chartVersion": "1.6.0"}).startswith("nemo-rl-gke:ray.chartVersion: 1.6.0 is outside")
    message = refusal(cluster={"minMasterVersion": "1.36.1-gke.100"})
    assert message.startswith("nemo-rl-gke:cluster.minMasterVersion: 1.36.1-gke.100 is outside")
    assert "GKE >=1.33.2-gke.1111000, <1.36" in message


def test_allow_untested_versions_admits_them_and_the_plan_says_untested():
    cfg = config(ray={"ncclInstallerImage": f"{GIB}:v1.0.5"}, allowUntestedVersions=True)
    rep = report(cfg.version_pins)
    assert rep["row"] is None and rep["nearestRow"] == "standard-gib-v1.1.1"
    assert rep["outside"] == [{"key": "ray.ncclInstallerImage", "stack": f"{GIB}:v1.0.5", "row": f"{GIB}:v1.1.1"}]
    assert rep["expect"]["nccl"] is None


def test_a_known_bad_pair_is_refused_naming_its_issue_even_when_untested_versions_are_allowed():
    for allow in (False, True):
        message = refusal(
            cluster={"minMasterVersion": "1.33.2-gke.1111000"}, lustre={"legacyPort": True}, allowUntestedVersions=allow
        )
        assert message.startswith("nemo-rl-gke:cluster.minMasterVersion: ")
        assert "https://github.com/vllm-project/vllm/issues/21979" in message and "known-bad" in message


def test_nccl_2_30_4_on_blackwell_is_refused_naming_nccl_issue_2167():
    # No recipe image brings NCCL 2.30 yet: a row that would (a future NeMo-RL image) must be refused on b200.
    matrix = copy.deepcopy(load())
    matrix["rows"][0]["nemoRl"]["v0.6.0"]["nccl"] = "2.30.4"
    pins = config(job={"recipe": "qwen2.5-1.5b-gsm8k"}).version_pins
    with pytest.raises(ValueError, match=r"NVIDIA/nccl/issues/2167") as err:
        check(pins, allow_untested=True, matrix=matrix)
    assert err.value.key == "job.recipe"
    check(Pins(**{**pins.__dict__, "flavour": "h200"}), allow_untested=False, matrix=matrix)  # H200 is Hopper


def test_the_gib_before_v1_1_2_caution_is_shown_not_refused_and_cites_the_pr_its_claim_is_read_from():
    rep = report(config().version_pins)
    assert [c["id"] for c in rep["cautions"]] == ["gib-before-v1.1.2-with-nccl-2.27"]
    # PR 5674's description is the claim's source; the "PR 5991 merged 2026-07-22" cited before could not be read
    # anywhere (issue 45) and is cited by no entry any more.
    assert rep["cautions"][0]["issue"] == "https://github.com/GoogleCloudPlatform/cluster-toolkit/pull/5674"
    for rule in load()["knownBad"]:
        assert "5991" not in rule["issue"] + rule["claim"] + str(rule.get("why", "")), rule["id"]


# ----------------------------------------------------------------------------- NeMo-RL v0.7.0

V070_ROW = "standard-gib-v1.1.1-nemo-rl-v0.7.0"


def v070_pins(**changes) -> Pins:
    pins = config(gpuPool={"gpuDriverVersion": "LATEST"}).version_pins
    return Pins(**{**pins.__dict__, "nemo_rl_tag": "v0.7.0", **changes})


def test_nemo_rl_v0_7_0_has_its_own_row_with_the_ray_and_nccl_of_its_uv_lock():
    # NVIDIA-NeMo/RL uv.lock at v0.7.0 (81aa43dd): ray 2.55.1, nvidia-nccl-cu13 2.28.9.
    rep = report(v070_pins())
    assert rep["row"] == V070_ROW, rep
    assert rep["versions"]["ray"] == "2.55.1" and rep["versions"]["nccl"] == "2.28.9"
    assert rep["expect"]["nccl"] == "2.28.9"
    # NCCL 2.28 is past the gIB-before-v1.1.2 caution's range (<2.28), which the v0.6.0 rows all meet.
    assert rep["cautions"] == []


def test_the_v0_7_0_row_is_not_the_default_no_stack_uses_it_and_no_gate_verified_it():
    rows = load()["rows"]
    assert rows[0]["id"] == "standard-gib-v1.1.1" and "v0.7.0" not in rows[0]["nemoRl"]
    row = next(r for r in rows if r["id"] == V070_ROW)
    assert row["covers"]["stacks"] == [] and row["verifiedBy"] is None
    assert report(config().version_pins)["row"] == "standard-gib-v1.1.1"  # the seeds' default stays


def test_nemo_rl_v0_7_0_on_autopilot_or_the_default_driver_is_outside_the_matrix():
    # A CUDA 13.2 image (Dockerfile BASE_IMAGE at v0.7.0): only LATEST is admitted until a gate run.
    rep = report(v070_pins(gpu_driver_version="DEFAULT"))
    assert rep["row"] is None and rep["nearestRow"] == V070_ROW
    assert rep["outside"] == [{"key": "gpuPool.gpuDriverVersion", "stack": "DEFAULT", "row": "LATEST"}]
    assert report(v070_pins(mode="autopilot"))["row"] is None


# ----------------------------------------------------------------------------- gIB v1.1.2

GIB_112_ROW = "standard-gib-v1.1.2"
# container-engine-accelerators PR 609's merge ref: the only upstream manifest that installs v1.1.2.
PR_609_MERGE = "2433eeed1cf497a571b27901ee49f95a60e52eed"


def row(row_id):
    return next(r for r in load()["rows"] if r["id"] == row_id)


def test_gib_v1_1_2_has_a_standard_row_from_pr_609s_manifest_that_no_stack_uses_yet():
    for row_id in (GIB_112_ROW, "standard-gib-v1.1.2-nemo-rl-v0.7.0"):
        gib = row(row_id)["gib"]
        assert f"{gib['image']}:{gib['tag']}" == f"{GIB}:v1.1.2" and PR_609_MERGE in gib["source"], row_id
        # Standard's installer at that ref: `container_entry.sh install`, no `--install-nccl` (NCCL stays the image's).
        assert (
            gib["installer"] == {"command": "install", "installNccl": False} and row(row_id)["nccl"]["from"] == "image"
        )
        assert gib["envPlugin"] == {"loadsWithNccl": ">=2.28.7"}
        assert row(row_id)["covers"] == {"modes": ["standard"], "flavours": ["b200", "h200"], "stacks": []}
    # The default stays v1.1.1: changing it would roll the installer DaemonSet under running workers.
    assert config().ray.nccl_installer_image == f"{GIB}:v1.1.1"


def test_a_stack_choosing_gib_v1_1_2_matches_its_row_without_cautions_and_the_gate_expects_v1_1_2():
    cfg = config(ray={"ncclInstallerImage": f"{GIB}:v1.1.2"})  # no allowUntestedVersions needed
    rep = report(cfg.version_pins)
    assert rep["row"] == GIB_112_ROW and rep["outside"] == [], rep
    # v1.1.2 is past gib-before-v1.1.2-with-nccl-2.27, and NCCL 2.27.5 is below the environment plugin's 2.28.7.
    assert rep["cautions"] == [] and rep["expect"] == {"nccl": "2.27.5", "gib": "v1.1.2"}
    from infra.gate_plan import expected_versions

    assert expected_versions(cfg) == {"expect_nccl": "2.27.5", "expect_gib": "v1.1.2"}


def test_gib_v1_1_2_with_nemo_rl_v0_7_0_is_cautioned_that_its_environment_plugin_loads():
    pins = v070_pins(gib_image=f"{GIB}:v1.1.2")
    rep = report(pins)
    assert rep["row"] == "standard-gib-v1.1.2-nemo-rl-v0.7.0", rep
    assert [c["id"] for c in rep["cautions"]] == ["gib-env-plugin-with-nccl-2.28.7"]
    assert rep["cautions"][0]["issue"].endswith("cluster-toolkit/pull/5674")
    check(pins, allow_untested=False)  # a caution, not a refusal


# ----------------------------------------------------------------------------- NeMo-RL v0.8.0


def test_nemo_rl_v0_8_0_has_no_row_because_its_tag_could_not_be_read_and_no_recipe_runs_it():
    from workloads.recipes import IMAGES

    entry = next(e for e in load()["notAdded"] if e["nemoRl"] == "v0.8.0")
    assert "v0.8.0" not in IMAGES and all("v0.8.0" not in r["nemoRl"] for r in load()["rows"])
    assert entry["main"]["commit"].startswith("7ea279abf") and entry["main"]["nccl"] == "2.30.7"
    # c95bec5a6 is on no tag read here: the sync-save override stays on for every async-saving image.
    assert entry["asyncSaveFix"]["inTags"] == [] and entry["asyncSaveFix"]["onMain"] is False


def test_nemo_rl_v0_8_0_records_the_release_pages_versions_but_no_nccl_and_an_open_fix_question():
    # The release page gives Ray, vLLM and PyTorch; it names no NCCL, and the 0.8.0 docs pages read stop before the
    # checkpoint manager's methods: both gaps are what keeps the row out, so each must stay said.
    entry = next(e for e in load()["notAdded"] if e["nemoRl"] == "v0.8.0")
    release = entry["release"]
    assert release["source"] == "https://github.com/NVIDIA-NeMo/RL/releases/tag/v0.8.0"
    assert (release["ray"], release["vllm"], release["pytorch"]) == ("2.58.0", "0.29.0", "2.13.0")
    assert release["nccl"] is None and release["unverified"] is True and "NCCL" in release["why"]
    assert entry["asyncSaveFix"]["inV080"] is None  # neither shown nor ruled out: no ASYNC_SAVE_FIXED entry
    urls = [d["url"] for d in entry["docs"]]
    assert "https://docs.nvidia.com/nemo/rl/0.8.0/apidocs/nemo_rl/nemo_rl.models.automodel.checkpoint.html" in urls
    assert all(u.startswith("https://docs.nvidia.com/nemo/rl/0.8.0/") for u in urls)
    # No recipe was checked against the tag's configs, so none may claim to move.
    assert entry["recipes"]["checked"] is False
    assert {k["key"] for k in entry["recipes"]["blockingKeys"]} >= {
        "policy.megatron_cfg.converter_type",
        "policy.dtensor_cfg.tensor_parallel_size",
    }


def test_a_v0_8_0_row_with_the_release_pages_ray_and_mains_nccl_would_be_held_back_on_b200():
    # Until v0.8.0's own NCCL is read, the nearest readable one (main's 2.30.7) stands in: NVIDIA/nccl 2167 refuses
    # it on Blackwell whatever Ray the release brings; h200 is not refused.
    entry = next(e for e in load()["notAdded"] if e["nemoRl"] == "v0.8.0")
    matrix = copy.deepcopy(load())
    matrix["rows"][0]["nemoRl"]["v0.6.0"] = {"ray": entry["release"]["ray"], "nccl": entry["main"]["nccl"]}
    pins = config(job={"recipe": "qwen2.5-1.5b-gsm8k"}).version_pins
    with pytest.raises(ValueError, match=r"NVIDIA/nccl/issues/2167"):
        check(pins, allow_untested=True, matrix=matrix)
    check(Pins(**{**pins.__dict__, "flavour": "h200"}), allow_untested=False, matrix=matrix)


def test_mains_nccl_2_30_7_gets_the_recorded_verdict_refused_on_b200_and_admitted_on_h200():
    # If v0.8.0 keeps main's NCCL, the matrix's own rule (NVIDIA/nccl 2167) holds it back on Blackwell.
    entry = next(e for e in load()["notAdded"] if e["nemoRl"] == "v0.8.0")
    matrix = copy.deepcopy(load())
    matrix["rows"][0]["nemoRl"]["v0.6.0"]["nccl"] = entry["main"]["nccl"]
    pins = config(job={"recipe": "qwen2.5-1.5b-gsm8k"}).version_pins
    with pytest.raises(ValueError, match=r"NVIDIA/nccl/issues/2167"):
        check(pins, allow_untested=True, matrix=matrix)
    assert entry["b200Verdict"] == "refuse"
    check(Pins(**{**pins.__dict__, "flavour": "h200"}), allow_untested=False, matrix=matrix)
