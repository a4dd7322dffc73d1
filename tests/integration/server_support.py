"""Shared pieces of the Engine Server security and protocol tests: certificates made at test
time, a ``sagaway server`` process, and a small application whose workers run workflows."""

from __future__ import annotations

import dataclasses
import datetime
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import sagaway as sw

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


# ----------------------------------------------------------------------------- certificates


@dataclasses.dataclass(frozen=True)
class Issued:
    """A certificate and its key, as PEM files."""

    cert: Path
    key: Path


@dataclasses.dataclass
class Authority:
    """A certificate authority made for one test."""

    name: str
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    pem: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _builder(subject: str, issuer: x509.Name, public: Any) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


def make_ca(folder: Path, name: str) -> Authority:
    """A self-signed CA written to ``folder/NAME-ca.pem``."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder(name, _name(name), key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    pem = folder / f"{name}-ca.pem"
    pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return Authority(name, key, cert, pem)


def issue(ca: Authority, folder: Path, name: str, *, server: bool) -> Issued:
    """A certificate signed by ``ca``: for a server (SAN 127.0.0.1 and localhost) or a client."""
    import ipaddress

    key = ec.generate_private_key(ec.SECP256R1())
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        _builder(name, ca.cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
    cert = builder.sign(ca.key, hashes.SHA256())
    issued = Issued(folder / f"{name}.pem", folder / f"{name}-key.pem")
    issued.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    issued.key.write_bytes(_key_pem(key))
    return issued


# ----------------------------------------------------------------------------- processes


def child_env(**extra: str) -> dict[str, str]:
    """This environment with the worktree's code first on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAGAWAY_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    env.update(extra)
    return env


class ServerProcess:
    """``sagaway server`` as a process; ``address`` once it printed its ready line."""

    def __init__(self, db: str, *args: str, env: dict[str, str] | None = None) -> None:
        command = [PYTHON, "-m", "sagaway.cli.main", "server", "--db", db, "--listen"]
        self.proc = subprocess.Popen(
            [*command, "127.0.0.1:0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env or child_env(),
            cwd=ROOT,
        )
        self.address = ""
        self.ready_line = ""
        self.stderr_lines: list[str] = []
        self._new_line = threading.Condition()
        self._stderr = threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True)
        self._stderr.start()

    def _drain(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            with self._new_line:
                self.stderr_lines.append(line)
                self._new_line.notify_all()

    def wait_for_stderr(self, text: str, *, after: int = 0, timeout: float = 30.0) -> str:
        """The first line of stderr (from line ``after`` on) holding ``text``, once printed."""
        with self._new_line:
            found = self._new_line.wait_for(
                lambda: any(text in line for line in self.stderr_lines[after:]), timeout
            )
            if not found:
                raise AssertionError(f"no {text!r} on stderr: {''.join(self.stderr_lines)}")
            return next(line for line in self.stderr_lines[after:] if text in line)

    def wait_ready(self, timeout: float = 30.0) -> str:
        """Read stdout until ``listening on HOST:PORT`` (bounded by a timer that kills it)."""
        assert self.proc.stdout is not None
        timer = threading.Timer(timeout, self.proc.kill)
        timer.start()
        try:
            line = self.proc.stdout.readline()
        finally:
            timer.cancel()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError(f"no ready line: {line!r}; stderr: {''.join(self.stderr_lines)}")
        self.ready_line = line.strip()
        self.address = self.ready_line.removeprefix("listening on ")
        return self.address

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.close_pipes()

    def close_pipes(self) -> None:
        self._stderr.join(10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


# ----------------------------------------------------------------------------- application


def build_app(url: str, **options: Any) -> sw.Manager:
    """A Manager with workflows ``greet`` (returns a greeting) and ``slow_greet``."""
    m = sw.Manager(url, poll_interval=0.05, recovery_interval=3600.0, **options)

    @m.register_activity
    async def shout(text: str) -> str:
        return text.upper()

    @m.register_workflow(name="greet")
    async def greet(name: str) -> dict[str, Any]:
        loud = await m.activity(shout, f"hello {name}").execute_get()
        return {"greeting": loud, "name": name}

    return m
