"""Every output folder is a dataset the Hub understands: its README.md is a dataset card whose YAML
names each split's shards (``load_dataset(OUT)`` gives exactly the output's splits and rows, any split
name) and whose figures are the manifest's; a README.md of the user's own is never overwritten."""

import json

import pytest
from optional import lazily, requires
from runs import SAMPLE, run_cli, run_transform

pytestmark = requires("datasets", "huggingface_hub")
datasets = lazily("datasets")
huggingface_hub = lazily("huggingface_hub")


def card_of(folder):
    return huggingface_hub.DatasetCard.load(str(folder / "README.md"))


def manifest_of(folder):
    return json.loads((folder / "manifest.json").read_text())


@pytest.mark.parametrize("fmt", ["arrow", "parquet"])
def test_load_dataset_gives_every_split_whatever_its_name(fmt, tmp_path):
    out = tmp_path / "o"
    run_transform(
        [SAMPLE / "prose.jsonl"],
        SAMPLE / "tokenizer.model",
        out,
        seq_len=128,
        output_format=fmt,
        split="heldout=10%,validation=5%",
        shard_size="500",
    )
    manifest = manifest_of(out)
    loaded = datasets.load_dataset(str(out))
    assert {name: split.num_rows for name, split in loaded.items()} == {
        name: s["rows"] for name, s in manifest["splits"].items()
    }
    assert set(loaded) == {"train", "heldout", "validation"}


def test_the_cards_figures_are_the_manifests(tmp_path):
    out = tmp_path / "o"
    run_transform([SAMPLE / "prose.jsonl"], SAMPLE / "tokenizer.model", out, seq_len=128, split="test=50")
    manifest, card = manifest_of(out), card_of(out)
    info = card.data.dataset_info
    assert [f["name"] for f in info["features"]] == [c["name"] for c in manifest["columns"]]
    assert {s["name"]: s["num_examples"] for s in info["splits"]} == {
        n: s["rows"] for n, s in manifest["splits"].items()
    }
    assert {s["name"]: s["num_bytes"] for s in info["splits"]} == {
        name: sum(sum(s["bytes"].values()) for s in manifest["shards"] if s["split"] == name)
        for name in manifest["splits"]
    }
    t = manifest["totals"]
    text = card.text
    assert (
        f"{t['documents_read']:,} read, {t['documents_written']:,} written, {t['documents_skipped']:,} skipped" in text
    )
    assert manifest["tokenizer"]["sha256"] in text and f"{t['rows']:,} in {t['shards']:,} shards" in text


def test_hf_outputs_load_from_disk_beside_their_card(tmp_path):
    out = tmp_path / "o"
    run_transform([SAMPLE / "prose.jsonl"], SAMPLE / "tokenizer.model", out, seq_len=128, output_format="hf")
    assert (out / "README.md").exists()
    assert datasets.load_from_disk(str(out)).num_rows == manifest_of(out)["totals"]["rows"]


def test_a_users_readme_is_never_overwritten_and_ours_follows_the_output(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "README.md").write_text("my notes\n")
    args = ["transform", SAMPLE / "prose.jsonl", "-t", SAMPLE / "tokenizer.model", "--seq-len", "128", "-o", out]
    first = run_cli(*args)
    assert first.returncode == 0 and "kept your README.md" in first.stderr
    assert run_cli(*args, "--seq-len", "64", "--overwrite").returncode == 0
    assert (out / "README.md").read_text() == "my notes\n"
    (out / "README.md").unlink()
    assert run_cli(*args, "--overwrite").returncode == 0
    rows = manifest_of(out)["totals"]["rows"]
    assert f"{rows:,} in" in (out / "README.md").read_text()
    # reshard and merge rewrite the card with the new figures; a user's card at their output stays
    assert run_cli("reshard", out, "--num-shards", "3").returncode == 0
    assert f"{rows:,} in 3 shards" in (out / "README.md").read_text()
    merged = tmp_path / "m"
    merged.mkdir()
    (merged / "README.md").write_text("mine\n")
    assert run_cli("merge", out, "-o", merged).returncode == 0
    assert (merged / "README.md").read_text() == "mine\n"


def test_the_cards_command_run_as_shown_makes_the_same_shards(tmp_path):
    """The card's "How they were made" block is a command line: a mixture's repeated --source and a
    per-source --text-key spelled as a shell reads them, no Python list, no stand-in for the inputs."""
    import shlex

    from sources import run_web_and_code

    weird = tmp_path / "my corpus"
    weird.mkdir()
    (weird / "web.jsonl").write_text((SAMPLE / "prose.jsonl").read_text())
    (weird / "code.jsonl").write_text(
        "".join(json.dumps({"body": json.loads(line)["text"]}) + "\n" for line in (SAMPLE / "code.jsonl").open())
    )
    out = tmp_path / "out"
    run_web_and_code(out, weird / "web.jsonl", weird / "code.jsonl", "body", weights="web=0.7,code=0.3", seq_len=256)
    card = (out / "README.md").read_text()
    command = card.split("## How they were made")[1].split("```")[1].strip()
    assert command.startswith("objcli transform --tokenizer") and "[" not in command and "(merged" not in command
    again = run_cli(*shlex.split(command)[1:], "-o", tmp_path / "again", "-q")
    assert again.returncode == 0, again.stderr
    manifests = [json.loads((o / "manifest.json").read_text()) for o in (out, tmp_path / "again")]
    assert [s["sha256"] for s in manifests[0]["shards"]] == [s["sha256"] for s in manifests[1]["shards"]]
