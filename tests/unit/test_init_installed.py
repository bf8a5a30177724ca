"""`reprobox init` learns which distribution holds each module the job needs from those distributions'
metadata alone, and reads every file of an installed distribution as what it may be: model weights
named `.pth` (torchmetrics' LPIPS weights crashed it), missing or malformed RECORDs, bytes that are no
text, links, pipes. Whatever a module is called, its distribution lands in the lock."""

from __future__ import annotations

import json
import os
import site as site_module
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from reprobox import cli
from reprobox.guest.installed import Distribution, Installed
from reprobox.guest.observe import Observer
from reprobox.guest.observe_imports import _location
from reprobox.scaffold._classify import _installed_from_tree

WEIGHTS = b"/\x00\x89\xff\xfe binary weights\n\x00\x01/more\n"  # a binary "line" that starts with /


def normalized(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def site_dir(base: Path) -> Path:
    site = base / "lib" / "python3" / "site-packages"
    site.mkdir(parents=True)
    return site


def distribution(
    site: Path, name: str, version: str, files: dict[str, bytes], *, top_level: str | None = None
) -> Path:
    """An installed distribution as a wheel leaves it: its files, METADATA and a RECORD naming them."""
    for relative, data in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_bytes(data)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nText\n")
    if top_level is not None:
        (info / "top_level.txt").write_text(top_level)
    listed = [*files, f"{info.name}/METADATA", f"{info.name}/RECORD"]
    (info / "RECORD").write_text("".join(f"{path},,\n" for path in listed))
    return info


def recorded(record: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


def test_every_installed_distribution_is_read_and_found_as_the_standard_library_finds_it() -> None:
    installed = Installed(sys.path)
    for found in installed.distributions():  # every file of every distribution, read without failing
        found.identity()
        found.top_level()
        installed.installed_from(found)
    owners = metadata.packages_distributions()
    compared = 0
    for root, names in sorted(owners.items()):
        location = _location(root) if root in sys.modules else None
        location = location or _origin_of(root)
        if not location or "-packages" + os.sep not in location:
            continue
        got = {normalized(d.identity()[0]) for d in installed.providing(root, location) if d.identity()}
        assert got == {normalized(n) for n in names}, root
        compared += 1
    assert compared > 50  # the test environment's packages: torch, numpy, yaml (PyYAML), PIL (pillow)...
    yaml = installed.providing("yaml", _origin_of("yaml") or "")
    assert [d.identity() for d in yaml] == [("PyYAML", metadata.version("PyYAML"))]


def _origin_of(root: str) -> str | None:
    from reprobox.guest.observe_imports import _origin

    return _origin(root)


def test_the_record_of_a_process_that_loaded_every_installed_package(tmp_path: Path) -> None:
    """The record as the job's process writes it at its exit, asked of every top-level module of every
    installed distribution at once: no distribution's files make it fail."""
    record = tmp_path / "observed.jsonl"
    observer = Observer(record, str(tmp_path))
    observer.at_start = set()
    roots = set(metadata.packages_distributions())
    observer.importers = dict.fromkeys(roots)  # as if each began to be imported by the run
    observer.imported()
    written = {normalized(line["distribution"]) for line in recorded(record) if "distribution" in line}
    assert {"pyyaml", "numpy", "torch", "torchmetrics", "pillow"} <= written
    assert not [line for line in recorded(record) if "\0" in line.get("source", "")]


def test_weights_named_pth_in_a_package_folder_are_data_not_a_path_file(tmp_path: Path) -> None:
    """torchmetrics ships lpips_models/*.pth: reading them as path files gave init a "folder" with a NUL
    byte in it, and its resolve() failed (exit 70)."""
    site = site_dir(tmp_path)
    files = {"weightsy/__init__.py": b"", "weightsy/lpips_models/alex.pth": WEIGHTS}
    info = distribution(site, "weightsy", "1.0", files, top_level="weightsy\n")
    assert Installed([str(site)]).installed_from(Distribution(info)) is None
    record = tmp_path / "observed.jsonl"
    script = (
        "import weightsy\nfrom pathlib import Path\nfrom reprobox.guest.observe import Observer\n"
        f"o = Observer(Path({str(record)!r}), {str(tmp_path / 'code')!r})\n"
        "o.job_imports.add('weightsy')\no.imported()\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", script], check=True, env=env)
    assert [line for line in recorded(record) if "distribution" in line] == [
        {
            "distribution": "weightsy",
            "module": "weightsy",
            "version": "1.0",
            "why": "loaded by the packages it imports",
        }
    ]
    # and what a job's process wrote is any string at all: one with a NUL byte is no folder of the repo
    assert _installed_from_tree({"weightsy": ("weightsy", "/\x00\x89weights")}, tmp_path) == {}


def test_a_path_file_in_the_site_directory_is_read_as_site_reads_it(tmp_path: Path) -> None:
    site = site_dir(tmp_path)
    tree = tmp_path / "src" / "ownpkg-tree"
    tree.mkdir(parents=True)
    (site / "inside").mkdir()
    path_file = (
        b"\xef\xbb\xbf# a comment\n\nimport sys; sys.flags\n\xff\xfe not text\n/no/such/folder\ninside\n"
        + str(tree).encode()
        + b"\n"
    )
    files = {"__editable__.ownpkg-1.0.pth": path_file, "ownpkg_data/x.pth": WEIGHTS}
    info = distribution(site, "ownpkg", "1.0", files, top_level="ownpkg\n")
    assert Installed([str(site)]).installed_from(Distribution(info)) == str(tree)
    # Python's own reading of the file agrees (bad bytes aside: this Python's site reads none of its lines)
    (site / "__editable__.ownpkg-1.0.pth").write_bytes(path_file.replace(b"\xff\xfe not text\n", b""))
    known = list(sys.path)
    try:
        site_module.addsitedir(str(site))
        added = sys.path[len(known) :]
    finally:
        sys.path[:] = known
    assert added == [str(site), str(site / "inside"), str(tree)]


def test_odd_metadata_reads_as_nothing_known(tmp_path: Path) -> None:
    site = site_dir(tmp_path)
    no_record = distribution(site, "norecord", "1.0", {"norecord/__init__.py": b""})
    (no_record / "RECORD").unlink()
    binary = distribution(site, "binrecord", "2.0", {"binrecord/__init__.py": b""})
    (binary / "RECORD").write_bytes(b"\x00\xff\xfe" * 100 + b'\n"unterminated,\n"quoted/__init__.py",,\n')
    (binary / "METADATA").write_bytes(b"\xff\xfe\x00Name")
    folder = distribution(site, "dirrecord", "1.0", {"dirrecord/__init__.py": b""})
    (folder / "RECORD").unlink()
    (folder / "RECORD").mkdir()
    pipe = distribution(site, "piperecord", "1.0", {"piperecord/__init__.py": b""})
    (pipe / "RECORD").unlink()
    os.mkfifo(pipe / "RECORD")  # read, it would wait for ever
    looped = distribution(site, "looprecord", "1.0", {"looprecord/__init__.py": b""})
    (looped / "RECORD").unlink()
    (looped / "RECORD").symlink_to(looped / "RECORD")
    linked = distribution(site, "Linked-Name", "3.0", {"linkedmod/__init__.py": b""})
    (tmp_path / "real-RECORD").write_text("linkedmod/__init__.py,,\n")
    (linked / "RECORD").unlink()
    (linked / "RECORD").symlink_to(tmp_path / "real-RECORD")
    egg = site / "eggmod-0.5-py3.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.0\nName: eggmod\nVersion: 0.5\n")
    (egg / "installed-files.txt").write_text("../eggmod/__init__.py\nPKG-INFO\n")
    (site / "eggmod").mkdir()
    (site / "eggmod" / "__init__.py").write_text("")

    installed = Installed([str(site), str(tmp_path / "missing"), str(tmp_path / "real-RECORD")])

    def owners(root: str) -> list[tuple[str, str] | None]:
        return [d.identity() for d in installed.providing(root, str(site / root / "__init__.py"))]

    for root in ("norecord", "dirrecord", "piperecord", "looprecord"):
        assert owners(root) == []  # no list of its files: not known to hold it
    assert owners("quoted") == [("binrecord", "2.0")]  # its name from its folder, its one readable line
    assert owners("linkedmod") == [("Linked-Name", "3.0")]
    assert owners("eggmod") == [("eggmod", "0.5")]
    for found in installed.distributions():
        assert installed.installed_from(found) is None


def test_modules_named_otherwise_are_found_reading_only_the_records_that_may_hold_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Among a hundred distributions without top_level.txt, each module's owner is found by its name
    (sklearn: scikit-learn, cv2: opencv-python, PIL: Pillow, google.protobuf: protobuf) having read the
    file lists of a few, never of all; a namespace inside the namespace (`google.cloud`) is looked for in
    those that may hold it until every file under it is one's that was read; a module a package put in
    `sys.modules` under a short name is held by none, and no list is read for it."""
    site = site_dir(tmp_path)
    for number in range(100):
        distribution(site, f"filler-{number:03d}", "1.0", {f"filler{number:03d}/__init__.py": b""})
    distribution(site, "scikit-learn", "1.9.1", {"sklearn/__init__.py": b"", "sklearn/_inner.so": b""})
    distribution(site, "opencv-python", "4.12.0", {"cv2/__init__.py": b""})
    distribution(site, "Pillow", "13.0.0", {"PIL/__init__.py": b""})
    distribution(site, "PyYAML", "6.0.4", {"yaml/__init__.py": b""}, top_level="yaml\n_yaml\n")
    distribution(site, "protobuf", "7.36.2", {"google/protobuf/__init__.py": b"", "google/_upb/m.so": b""})
    distribution(site, "google-auth", "2.63.0", {"google/auth/__init__.py": b""})
    distribution(site, "google-cloud-core", "2.5.0", {"google/cloud/client.py": b""})
    distribution(site, "google-cloud-storage", "3.4.0", {"google/cloud/storage/__init__.py": b""})
    reads: list[str] = []
    read_files = Distribution._read_files

    def counted(self: Distribution) -> list[str]:
        reads.append(self.label)
        return read_files(self)

    monkeypatch.setattr(Distribution, "_read_files", counted)
    installed = Installed([str(site)])
    google = f"{site / 'google'}{os.sep}"

    def owners(root: str, location: str, *modules: str) -> list[tuple[str, str] | None]:
        reads.clear()
        return [d.identity() for d in installed.providing(root, location, modules)]

    assert owners("sklearn", str(site / "sklearn" / "__init__.py")) == [("scikit-learn", "1.9.1")]
    assert reads == ["scikit_learn-1.9.1"]
    assert owners("cv2", str(site / "cv2" / "__init__.py")) == [("opencv-python", "4.12.0")]
    assert reads == ["opencv_python-4.12.0"]
    assert owners("PIL", str(site / "PIL" / "__init__.py")) == [("Pillow", "13.0.0")]
    assert reads == ["Pillow-13.0.0"]
    assert owners("yaml", str(site / "yaml" / "__init__.py")) == [("PyYAML", "6.0.4")]
    assert reads == []  # its top_level.txt says so
    assert owners("google", google, "google.protobuf", "google._upb") == [("protobuf", "7.36.2")]
    assert reads == ["protobuf-7.36.2"]
    assert owners("google", google, "google.auth", "google.auth.transport") == [("google-auth", "2.63.0")]
    assert reads == ["google_auth-2.63.0"]
    cloud = [("google-cloud-core", "2.5.0"), ("google-cloud-storage", "3.4.0")]
    assert sorted(owners("google", google, "google.cloud", "google.cloud.storage")) == cloud
    assert sorted(reads) == ["google_cloud_core-2.5.0", "google_cloud_storage-3.4.0"]  # every file theirs
    (site / "google" / "cloud" / "left.lock").write_bytes(b"")  # a file no list names: all are read
    installed = Installed([str(site)])  # none read yet
    assert sorted(owners("google", google, "google.cloud", "google.cloud.storage")) == cloud
    assert len(reads) == len(installed.distributions()) - 1  # all but PyYAML, whose top_level.txt says
    assert owners("_inner", str(site / "sklearn" / "_inner.so")) == []
    assert reads == []
    # without the names imported under it, a namespace package is every distribution's that holds it
    assert len(owners("google", google)) == 4


def test_an_import_cut_short_by_the_interrupt_is_recorded(tmp_path: Path, monkeypatch) -> None:
    """The watch's Ctrl-C lands while a library is imported as a file is saved: the import never
    finished, so the module is not loaded at the exit, and the job still needs it."""
    site = site_dir(tmp_path)
    distribution(site, "lazy-save", "2.0", {"lazysave/__init__.py": b"def dump(path): pass\n"})
    monkeypatch.syspath_prepend(str(site))
    record = tmp_path / "observed.jsonl"
    observer = Observer(record, str(tmp_path / "code"))
    observer.importers["lazysave"] = None  # its import event came, and it never finished
    assert "lazysave" not in sys.modules
    observer.imported()
    assert [
        (line["distribution"], line["version"]) for line in recorded(record) if "distribution" in line
    ] == [("lazy-save", "2.0")]


LIBRARY = """\
def save(path):
    try:  # the saver is imported only as a file is saved, and saving cannot do without it
        import lazysave
    except ImportError as missing:
        raise ImportError("saving needs lazysave: pip install lazy-save") from missing
    lazysave.dump(path)
"""
TRAIN = """\
import time

import fwidgets
import weightsy

fwidgets.save("model.pt")
time.sleep(120)  # training goes on; init's watch stops it at the checkpoint above
"""


def test_modules_named_otherwise_and_a_saver_imported_lazily_land_in_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    site = site_dir(tmp_path / "env")
    distribution(site, "Fancy-Widgets", "1.0", {"fwidgets/__init__.py": LIBRARY.encode()})  # no top_level.txt
    distribution(
        site,
        "lazy-save",
        "2.0",
        {"lazysave/__init__.py": b"def dump(p):\n    open(p, 'wb').write(b'w' * 99)\n"},
    )
    files = {"weightsy/__init__.py": b"", "weightsy/lpips_models/alex.pth": WEIGHTS}
    distribution(site, "weightsy", "1.5", files, top_level="weightsy\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "train.py").write_text(TRAIN)
    monkeypatch.chdir(repo)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # no package index: the lock fails at once, the job file says so
    monkeypatch.setenv("UV_OFFLINE", "1")
    capsys.readouterr()
    code = cli.main(["init", "--json", "-q", "--seconds", "30", "--", sys.executable, "train.py"])
    data = json.loads(capsys.readouterr().out or "{}")
    assert code == 0, data
    assert data["missing_packages"] == {"Fancy-Widgets": "1.0", "lazy-save": "2.0", "weightsy": "1.5"}
    wanted = (repo / "requirements.in").read_text()
    assert "Fancy-Widgets==1.0  # imported by train.py:3" in wanted
    assert "lazy-save==2.0" in wanted and "weightsy==1.5  # imported by train.py:4" in wanted


def test_files_of_the_jobs_code_that_no_parser_reads_import_nothing(tmp_path: Path) -> None:
    from reprobox.guest.code_imports import imports_in_code

    (tmp_path / "deep.py").write_text("x = " + "+".join(["1"] * 3000) + "\nimport os\n")  # too deep
    (tmp_path / "nul.py").write_bytes(b"import os\x00\n")
    (tmp_path / "binary.py").write_bytes(bytes(range(256)))
    (tmp_path / "train.py").write_text("import json\n")
    assert list(imports_in_code(sorted(str(p) for p in tmp_path.iterdir()), str(tmp_path))) == ["json"]


def observed_run(tmp_path: Path, site: Path, train: str) -> Path:
    """Run ``train`` as init's short run does (the startup hook and the observer on, ``site`` on the
    path) and return the record of what it imported."""
    import reprobox
    from reprobox.guest import settings

    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(train)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    package_root = Path(reprobox.__file__).parent.parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(package_root / "reprobox" / "guest" / "_boot"), str(package_root), str(site)]
        ),
        settings.HOOK_ACTIVE: "1",
        settings.OBSERVE: "1",
        settings.RUN_DIR: str(run_dir),
        settings.CODE_DIR: str(code),
    }
    subprocess.run([sys.executable, "train.py"], cwd=code, env=env, check=True, timeout=120)
    (record,) = (run_dir / settings.GUEST_STATE).glob("observed-*.jsonl")
    return record


def test_a_saver_a_library_loads_with_import_module_cut_short_is_recorded(tmp_path: Path) -> None:
    """A library loads its saver with importlib.import_module as the file is saved (which raises no
    "import" audit event), and the watch's Ctrl-C lands while the saver loads: it never finished."""

    site = site_dir(tmp_path / "env")
    library = b"import importlib\n\n\ndef save(path):\n    importlib.import_module('slowsave').dump(path)\n"
    distribution(site, "lazy-lib", "1.0", {"lazylib/__init__.py": library})
    distribution(
        site, "slow-save", "3.0", {"slowsave/__init__.py": b"raise KeyboardInterrupt  # the watch's\n"}
    )
    train = "import lazylib\n\ntry:\n    lazylib.save('model.pt')\nexcept KeyboardInterrupt:\n    pass\n"
    record = observed_run(tmp_path, site, train)
    assert sorted(
        (line["distribution"], line["version"]) for line in recorded(record) if "distribution" in line
    ) == [
        ("lazy-lib", "1.0"),
        ("slow-save", "3.0"),
    ]


def test_a_package_a_library_only_asks_about_is_not_recorded(tmp_path: Path) -> None:
    """importlib.util.find_spec asks whether a module is there and imports nothing (torch's dynamo asks
    so of pandas and scikit-learn): what is only asked about is no package the job needs."""

    site = site_dir(tmp_path / "env")
    library = b"import importlib.util\n\nHAS_FANCY = importlib.util.find_spec('fancyopt') is not None\n"
    distribution(site, "asking-lib", "1.0", {"askinglib/__init__.py": library})
    distribution(site, "fancy-opt", "2.0", {"fancyopt/__init__.py": b"VALUE = 1\n"})
    record = observed_run(tmp_path, site, "import askinglib\n\nassert askinglib.HAS_FANCY\n")
    found = sorted(line["distribution"] for line in recorded(record) if "distribution" in line)
    assert found == ["asking-lib"]


class _Proxy:
    """What a lazy loader leaves in sys.modules: any question loads the real module, and that fails."""

    def __getattr__(self, name: str) -> object:
        raise ImportError(f"proxymod needs its real module to answer {name}")


def test_a_lazy_modules_proxy_that_fails_when_asked_is_no_failure_of_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "proxymod", _Proxy())
    record = tmp_path / "observed.jsonl"
    observer = Observer(record, str(tmp_path))
    observer.at_start.discard("proxymod")
    observer.job_imports |= {"proxymod", "yaml"}
    import yaml  # noqa: F401

    observer.imported()
    assert [line["distribution"] for line in recorded(record) if "distribution" in line] == ["PyYAML"]
