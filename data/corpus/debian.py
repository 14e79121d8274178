"""Fetch a pinned Debian package and read its files, with no dpkg and no root.

The corpus builders take their text from Debian packages: each names the exact
version and the sha256 of its ``.deb``, so a rebuild reads exactly the bytes the
shipped files were made from.
"""
import hashlib
import io
import subprocess
import sys
import tarfile
from pathlib import Path

DOWNLOADS = Path(__file__).resolve().parent / "_downloads"  # git-ignored


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch_deb(package: str, version: str, expected_sha256: str, arch: str = "all") -> bytes:
    """Return the .deb's bytes, downloading it with ``apt-get download`` unless already cached."""
    name = f"{package}_{version.replace(':', '%3a')}_{arch}.deb"
    path = DOWNLOADS / name
    if not path.exists():
        DOWNLOADS.mkdir(exist_ok=True)
        # apt-get download saves into the working directory.
        result = subprocess.run(["apt-get", "download", f"{package}={version}"], cwd=DOWNLOADS)
        if result.returncode != 0 or not path.exists():
            sys.exit(f"apt-get download {package}={version} failed; try `apt-get update` first, "
                     f"or place {name} (from any Debian mirror) in {DOWNLOADS}.")
    data = path.read_bytes()
    if sha256(data) != expected_sha256:
        sys.exit(f"{path}: sha256 is {sha256(data)}, expected {expected_sha256}.\n"
                 "The upstream file changed or the download is corrupt; delete it and retry.")
    return data


def deb_data_tar(deb: bytes) -> tarfile.TarFile:
    """Open the data.tar.* member of a .deb (an ar archive) without dpkg-deb.

    ar format: an 8-byte magic, then per member a 60-byte header (name in bytes
    0-16, decimal size in bytes 48-58) and the body, padded to an even length.
    """
    if deb[:8] != b"!<arch>\n":
        raise ValueError("not a .deb (ar) archive")
    pos = 8
    while pos < len(deb):
        header = deb[pos:pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58])
        if name.startswith("data.tar"):
            return tarfile.open(fileobj=io.BytesIO(deb[pos + 60:pos + 60 + size]))
        pos += 60 + size + size % 2
    raise ValueError("no data.tar member in the .deb")


def read_member(deb: bytes, path: str) -> bytes:
    with deb_data_tar(deb) as tar:
        return tar.extractfile(path).read()
