"""The cluster's own secrets, made fresh for every cluster: a CA, the serving certificate, the
service-account signing key and static bearer tokens.

Everything is written under one directory (mode 0600 for private material) and lives only as
long as the cluster: nothing is reused between runs, nothing leaves the machine.
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_FOR = datetime.timedelta(days=2)


@dataclass(frozen=True, slots=True)
class Identity:
    """A static-token user: the token file line is ``token,user,uid,"group1,group2"``."""

    user: str
    groups: tuple[str, ...]
    token: str


@dataclass(frozen=True, slots=True)
class Pki:
    directory: Path
    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path  # signs ServiceAccount tokens (private)
    sa_pub: Path  # verifies them
    token_file: Path
    identities: dict[str, Identity]  # admin, scheduler, controllers, kwok

    def token(self, who: str) -> str:
        return self.identities[who].token


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    signer: ec.EllipticCurvePrivateKey,
    *,
    ca: bool,
    hosts: tuple[str, ...] = (),
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALID_FOR)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
    else:
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False).add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
    return builder.sign(signer, hashes.SHA256())


SERVING_HOSTS = (
    "127.0.0.1",
    "localhost",
    "10.96.0.1",  # the first address of the service range: the in-cluster `kubernetes` Service
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)

IDENTITIES = {
    "admin": ("kai-ray-e2e-admin", ("system:masters",)),
    "scheduler": ("system:kube-scheduler", ()),
    "controllers": ("system:kube-controller-manager", ()),
    "kwok": ("kwok-controller", ("system:masters",)),
}


def make_pki(directory: Path) -> Pki:
    """A CA, the apiserver's certificate for loopback, a service-account key pair and tokens."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("kai-ray-e2e-ca", ca_key, _name("kai-ray-e2e-ca"), ca_key, ca=True)
    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving = _certificate("kube-apiserver", serving_key, ca.subject, ca_key, ca=False, hosts=SERVING_HOSTS)
    sa_key = ec.generate_private_key(ec.SECP256R1())

    pki = Pki(
        directory=directory,
        ca_cert=directory / "ca.crt",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
        token_file=directory / "tokens.csv",
        identities={
            who: Identity(user, groups, secrets.token_urlsafe(32)) for who, (user, groups) in IDENTITIES.items()
        },
    )
    pki.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.serving_cert.write_bytes(serving.public_bytes(serialization.Encoding.PEM))
    _write_key(pki.serving_key, serving_key)
    _write_key(pki.sa_key, sa_key)
    pki.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    lines = []
    for index, identity in enumerate(pki.identities.values()):
        groups = ",".join(identity.groups)
        lines.append(f'{identity.token},{identity.user},uid-{index},"{groups}"')
    pki.token_file.write_text("\n".join(lines) + "\n")
    pki.token_file.chmod(0o600)
    return pki
