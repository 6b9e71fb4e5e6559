"""TLS for a Dask batch (``--scheduler``): which credential the scheduler, the workers and this client hold.

- ``local:N``: :func:`batch_security`, Dask's ``Security.temporary()`` (``distributed/security.py``): a
  2048-bit RSA key and a self-signed certificate made for this batch, used by the scheduler, every
  worker and the client, which accept only peers that show it (``ssl.CERT_REQUIRED``, the certificate
  itself the only CA). The address is ``tls://127.0.0.1:PORT``. The key is a string in this process's
  memory; the nannies hand it to the worker processes they start through multiprocessing's pipe
  (``distributed/nanny.py``, spawn). Python's ``ssl`` loads a key only from a file, so Dask writes it
  for that moment into a private temporary folder (``tempfile.TemporaryDirectory``, mode 0700, of the
  grader's uid) and removes it (``Security._get_tls_context``). Learner code (another uid, no network
  namespace where the minimum holds) can neither read it nor reach the scheduler without it.
- A remote ``tls://HOST:PORT`` (or a scheduler file whose address is one): :func:`remote_security`, the
  client's credential from ``--tls-ca-file/--tls-cert/--tls-key`` (the flag names of ``dask scheduler``
  and ``dask worker``), else Dask's own configuration (``distributed.comm.tls.ca-file``,
  ``distributed.comm.tls.client.cert`` and ``.key``, i.e. ``Security()``'s defaults). None at all: one
  line naming what to set (Dask itself would stop with a ``TypeError`` traceback, ``distributed/comm/tls.py``).
- A remote ``tcp://`` scheduler: plain TCP. It is allowed only because every worker the batch admits
  gives learner code its own empty network namespace (``autograder.batch.distributed._Batch.admit_new``
  refuses the others unless ``--insecure``): learner code cannot reach the scheduler, whatever the
  wire carries. Other machines on that network can: keep it private, or use TLS.

>>> TlsFiles().given(), TlsFiles(ca_file="ca.pem").given()
(False, True)
>>> scheme("tls://10.0.0.5:8786"), scheme("10.0.0.5:8786")
('tls', 'tcp')
>>> remote_security("tcp://10.0.0.5:8786", TlsFiles(cert="grader.pem"))
Traceback (most recent call last):
...
autograder.errors.AutograderError: --tls-cert is for a TLS scheduler, but --scheduler tcp://10.0.0.5:8786 is plain tcp; give its tls://HOST:PORT address (a scheduler started with `dask scheduler --tls-ca-file ... --tls-cert ... --tls-key ...`)
"""

from __future__ import annotations

import json
import ssl
from dataclasses import dataclass, fields
from pathlib import Path

from ..errors import AutograderError

#: The Dask settings a client's TLS credential comes from when no flag gives it (their environment names).
CONFIG_NAMES = ("DASK_DISTRIBUTED__COMM__TLS__CA_FILE", "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT",
                "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY")


@dataclass(frozen=True)
class TlsFiles:
    """This client's TLS credential for a remote scheduler, as files (PEM); None: Dask's configuration."""

    ca_file: str | None = None
    """The certificate authority that signed the scheduler's and workers' certificates (``--tls-ca-file``)."""
    cert: str | None = None
    """This client's certificate, signed by that authority (``--tls-cert``)."""
    key: str | None = None
    """Its private key (``--tls-key``; may be omitted when appended to the certificate file)."""

    def given(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    def flags(self) -> list[str]:
        """The flags given, by their command-line names."""
        return [f"--tls-{f.name.replace('_', '-')}" for f in fields(self) if getattr(self, f.name)]


def scheme(address: str) -> str:
    """The protocol of a Dask address (Dask's default, tcp, when it names none)."""
    from distributed.comm.addressing import parse_address

    return parse_address(address)[0]


def file_address(path: str | Path) -> str | None:
    """The scheduler's address in a Dask scheduler file, None if it has none that can be read."""
    try:
        address = json.loads(Path(path).read_text(encoding="utf-8")).get("address")
    except (OSError, ValueError, AttributeError):
        return None   # Dask's Client says why, in the grader's "cannot reach" line
    return address if isinstance(address, str) else None


def batch_security():
    """The credential of one ``local:N`` batch: made now, held in memory, gone with the batch."""
    from distributed.security import Security

    return Security.temporary()


def remote_security(address: str, files: TlsFiles = TlsFiles()):
    """The client's Security for the scheduler at ``address``; AutograderError (one line) when a tls://
    address finds no credential, a flag names a file that cannot be loaded, or TLS flags meet tcp://."""
    from distributed.security import Security

    protocol = scheme(address)
    if protocol != "tls":
        if files.given():
            raise AutograderError(f"{'/'.join(files.flags())} is for a TLS scheduler, but --scheduler {address} is "
                                  f"plain {protocol}; give its tls://HOST:PORT address (a scheduler started with "
                                  f"`dask scheduler --tls-ca-file ... --tls-cert ... --tls-key ...`)")
        security = Security()
        if security.require_encryption:
            raise AutograderError(f"Dask's configuration requires encryption (distributed.comm.require-encryption) "
                                  f"but --scheduler {address} is plain {protocol}; give its tls:// address")
        return security
    for flag, path in zip(files.flags(), (p for p in (files.ca_file, files.cert, files.key) if p)):
        if not Path(path).is_file():
            raise AutograderError(f"{flag} {path}: no such file (a PEM file, as given to `dask scheduler {flag}`)")
    given = {name: value for name, value in (("tls_ca_file", files.ca_file), ("tls_client_cert", files.cert),
                                             ("tls_client_key", files.key)) if value}
    security = Security(**given)
    if not (security.tls_ca_file and security.tls_client_cert):
        raise AutograderError(f"--scheduler {address} is a TLS scheduler and this client has no TLS credential for "
                              f"it: pass --tls-ca-file CA.pem --tls-cert CERT.pem --tls-key KEY.pem (signed by the "
                              f"CA the scheduler was started with), or set {', '.join(CONFIG_NAMES[:2])} (and "
                              f"{CONFIG_NAMES[2]})")
    try:
        security.get_connection_args("client")   # loads the files now: a bad one is one line, not a traceback
    except (ssl.SSLError, OSError, ValueError) as e:
        raise AutograderError(f"--scheduler {address}: cannot load this client's TLS credential (CA "
                              f"{security.tls_ca_file}, certificate {security.tls_client_cert}): "
                              f"{str(e).strip() or type(e).__name__}"[:400]) from None
    return security
