"""TLS listeners as Kafka configures them: PEM key stores and trust stores, client authentication, protocols and
cipher suites (DefaultSslEngineFactory), the reload of a renewed certificate (SslFactory), and the principal of a
client certificate (DefaultKafkaPrincipalBuilder, SslPrincipalMapper).

Pure: no server state. The server builds a context with `server_context`, hands it to its listener, calls `reload`
when the operator renews the certificate, and asks `peer_principal` for each accepted connection.

No dependency beyond the standard library: the subject of a certificate is read from its DER bytes
(`getpeercert(binary_form=True)`) by the small DER reader below, because `getpeercert()`'s dictionary has lost
what Java's string needs (the ASN.1 type of each value, and the BER bytes of attributes without a keyword)."""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

ANONYMOUS = "User:ANONYMOUS"


class TlsConfigError(ValueError):
    """A TLS setting kcoord cannot use: one line that names the setting."""


class NoMatchingRule(Exception):
    """No rule of ssl.principal.mapping.rules applies to a certificate's DN. Kafka fails the connection's
    authentication (SslPrincipalMapper.NoMatchingRule, wrapped in a KafkaException): so does the server."""


# ---------------------------------------------------------------------------------------------------------------
# Settings

# Kafka's name -> field. Passwords stay in fields that repr() does not show.
_NAMES: dict[str, str] = {
    "ssl.keystore.type": "keystore_type",
    "ssl.keystore.location": "keystore_location",
    "ssl.keystore.key": "keystore_key",
    "ssl.keystore.certificate.chain": "keystore_certificate_chain",
    "ssl.keystore.password": "keystore_password",
    "ssl.key.password": "key_password",
    "ssl.truststore.type": "truststore_type",
    "ssl.truststore.location": "truststore_location",
    "ssl.truststore.certificates": "truststore_certificates",
    "ssl.truststore.password": "truststore_password",
    "ssl.client.auth": "client_auth",
    "ssl.enabled.protocols": "enabled_protocols",
    "ssl.cipher.suites": "cipher_suites",
    "ssl.principal.mapping.rules": "principal_mapping_rules",
    "ssl.allow.dn.changes": "allow_dn_changes",
    "ssl.allow.san.changes": "allow_san_changes",
}
SETTING_OF: dict[str, str] = {v: k for k, v in _NAMES.items()}

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def _split_list(value: str) -> tuple[str, ...]:
    """A Kafka LIST setting: comma-separated, each item trimmed, empty items dropped."""
    return tuple(item.strip() for item in value.split(",") if item.strip())


def _bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v not in ("true", "false"):
        raise TlsConfigError(f"{name}={value!r}: expected true or false")
    return v == "true"


@dataclass(frozen=True)
class TlsSettings:
    """One listener's TLS settings under Kafka's names (`SETTING_OF` maps each field to its name) and defaults,
    except `ssl.keystore.type` and `ssl.truststore.type`, whose default is PEM (Kafka's is JKS): PEM is the only
    type kcoord reads."""

    keystore_type: str = "PEM"
    keystore_location: str | None = None
    keystore_key: str | None = None
    keystore_certificate_chain: str | None = None
    keystore_password: str | None = None
    key_password: str | None = None
    truststore_type: str = "PEM"
    truststore_location: str | None = None
    truststore_certificates: str | None = None
    truststore_password: str | None = None
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: tuple[str, ...] = ()
    principal_mapping_rules: str = "DEFAULT"
    allow_dn_changes: bool = False
    allow_san_changes: bool = False
    # (Kafka's name, the name it was read under) for each setting a listener override gave: errors name the latter
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def __repr__(self) -> str:  # the key, its password and the store passwords never reach a log
        secret = {"keystore_key", "keystore_password", "key_password", "truststore_password"}
        shown = ", ".join(
            f"{f.name}={'<hidden>' if f.name in secret and getattr(self, f.name) is not None else repr(getattr(self, f.name))}"
            for f in fields(self)
            if f.name != "sources"
        )
        return f"TlsSettings({shown})"

    @classmethod
    def from_kafka(
        cls, settings: Mapping[str, str], listener: str | None = None, security_protocol: str | None = None
    ) -> TlsSettings:
        """Read the ssl.* settings from Kafka-named settings (other names are ignored). With `listener`,
        `listener.name.<lower-cased listener>.<ssl setting>` wins over `<ssl setting>`, as Kafka's per-listener
        override. With `security_protocol="SASL_SSL"` only the listener's own ssl.client.auth applies (Kafka forces
        the broker-wide value to none on SASL_SSL listeners, ChannelBuilders)."""
        prefix = f"listener.name.{listener.lower()}." if listener else None
        values: dict[str, Any] = {}
        sources: list[tuple[str, str]] = []
        for name, attr in _NAMES.items():
            raw = settings.get(prefix + name) if prefix else None
            shown = prefix + name if raw is not None and prefix else name
            if raw is None:
                if name == "ssl.client.auth" and (security_protocol or "").upper() == "SASL_SSL":
                    continue
                raw = settings.get(name)
            if raw is None:
                continue
            if shown != name:
                sources.append((name, shown))
            if not isinstance(raw, str):
                raise TlsConfigError(f"{shown}: expected a string, got {type(raw).__name__}")
            if attr in ("allow_dn_changes", "allow_san_changes"):
                values[attr] = _bool(shown, raw)
            elif attr in ("enabled_protocols", "cipher_suites"):
                values[attr] = _split_list(raw)
            elif attr in ("keystore_type", "truststore_type"):
                values[attr] = raw.strip().upper()
            elif attr == "client_auth":
                values[attr] = raw.strip().lower()
            else:
                values[attr] = raw
        s = cls(**values, sources=tuple(sources))
        s.validate()
        return s

    def validate(self) -> None:
        """The checks that need no file: each mistake is a TlsConfigError naming the setting (as it was
        written: a listener override's own name)."""
        with self.naming():
            self._validate()

    @contextlib.contextmanager
    def naming(self) -> Iterator[None]:
        """A TlsConfigError raised inside names the setting as it was written (listener.name.x.ssl...)."""
        try:
            yield
        except TlsConfigError as e:
            message = str(e)
            for name, shown in self.sources:
                if message.startswith(name) and message[len(name) : len(name) + 1] in (":", "=", " "):
                    raise TlsConfigError(shown + message[len(name) :]) from None
            raise

    def _validate(self) -> None:
        for name, t in (("ssl.keystore.type", self.keystore_type), ("ssl.truststore.type", self.truststore_type)):
            if t != "PEM":
                raise TlsConfigError(
                    f"{name}={t}: kcoord reads PEM only (convert a JKS or PKCS12 store with keytool/openssl to PEM)"
                )
        if self.client_auth not in CLIENT_AUTH:
            raise TlsConfigError(f"ssl.client.auth={self.client_auth!r}: expected one of required, requested, none")
        if not self.enabled_protocols:
            raise TlsConfigError("ssl.enabled.protocols: empty; kcoord speaks TLSv1.2 and TLSv1.3")
        for p in self.enabled_protocols:
            if p not in PROTOCOLS:
                raise TlsConfigError(
                    f"ssl.enabled.protocols: {p!r} is not supported; kcoord speaks TLSv1.2 and TLSv1.3"
                )
        PrincipalMapper(self.principal_mapping_rules)
        _cipher_plan(self.cipher_suites, self.enabled_protocols)
        # DefaultSslEngineFactory.createKeystore / createTruststore, in their order
        if self.keystore_key is not None:
            if self.keystore_certificate_chain is None:
                raise TlsConfigError(
                    "ssl.keystore.key: SSL private key is specified, but ssl.keystore.certificate.chain is not"
                )
            if self.keystore_location is not None:
                raise TlsConfigError(
                    "ssl.keystore.location: both an SSL key store location and a separate ssl.keystore.key are set"
                )
            if self.keystore_password is not None:
                raise TlsConfigError(
                    "ssl.keystore.password: cannot be specified with PEM format, only ssl.key.password may be"
                )
        elif self.keystore_certificate_chain is not None:
            raise TlsConfigError(
                "ssl.keystore.certificate.chain: SSL certificate chain is specified, but ssl.keystore.key is not"
            )
        elif self.keystore_location is not None:
            if self.keystore_password is not None:
                raise TlsConfigError(
                    "ssl.keystore.password: cannot be specified with PEM format, only ssl.key.password may be"
                )
        else:
            raise TlsConfigError(
                "ssl.keystore.location: a TLS listener needs a key and certificate "
                "(ssl.keystore.location, or ssl.keystore.key with ssl.keystore.certificate.chain)"
            )
        if self.truststore_certificates is not None and self.truststore_location is not None:
            raise TlsConfigError(
                "ssl.truststore.location: both an SSL trust store location and ssl.truststore.certificates are set"
            )
        if self.truststore_password is not None:
            raise TlsConfigError("ssl.truststore.password: cannot be specified for PEM format")


# ---------------------------------------------------------------------------------------------------------------
# PEM (DefaultSslEngineFactory.PemParser and PemStore)


def _pem_pattern(name: str) -> re.Pattern[str]:
    begin_or_end = r"-+%s\s*.*%s[^-]*-+\s+"
    name_ignore_space = name.replace(" ", r"\s+")
    encoding_params = r"\s*[^\r\n]*:[^\r\n]*[\r\n]+"
    base64 = r"([a-zA-Z0-9/+=\s]*)"
    return re.compile(
        begin_or_end % ("BEGIN", name_ignore_space)
        + f"(?:{encoding_params})*"
        + base64
        + begin_or_end % ("END", name_ignore_space)
    )


_CERTIFICATE = _pem_pattern("CERTIFICATE")
_PRIVATE_KEY = _pem_pattern("PRIVATE KEY")
_LABEL = re.compile(r"-+BEGIN\s*([^-]*?)\s*-+")


def _pem(label: str, der: bytes) -> str:
    import base64

    body = base64.b64encode(der).decode()
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n"


def _decode(match: re.Match[str], setting: str) -> bytes:
    import base64
    import binascii

    try:
        return base64.b64decode(re.sub(r"\s", "", match.group(1)), validate=True)
    except binascii.Error:
        raise TlsConfigError(f"{setting}: a PEM entry's base64 text is damaged") from None


def _pem_certificates(pem: str, setting: str) -> list[bytes]:
    """The DER of each CERTIFICATE entry, found as Kafka's PemParser finds them: whitespace (line breaks or the
    spaces a properties file's line continuations leave) may stand anywhere in the base64 text."""
    entries = [_decode(m, setting) for m in _CERTIFICATE.finditer(pem + "\n")]
    if not entries:
        raise TlsConfigError(f"{setting}: no CERTIFICATE entries in the PEM text")
    return entries


def _private_key(pem: str, setting: str, password: str | None) -> tuple[str, bytes]:
    """Kafka's PemStore.privateKey: exactly one PKCS#8 key (`PRIVATE KEY`, or `ENCRYPTED PRIVATE KEY` with
    ssl.key.password), RSA, DSA or EC. OpenSSL would load a PKCS#1 key too; Kafka does not, nor does kcoord.
    Returns its label and DER."""
    keys = list(_PRIVATE_KEY.finditer(pem + "\n"))
    if not keys:
        raise TlsConfigError(f"{setting}: no PRIVATE KEY entry in the PEM text (Kafka: Private key not provided)")
    if len(keys) != 1:
        raise TlsConfigError(f"{setting}: expected one private key, but found {len(keys)}")
    label_match = _LABEL.match(keys[0].group(0))
    label = " ".join(label_match.group(1).split()) if label_match else ""
    if label == "ENCRYPTED PRIVATE KEY":
        if password is None:
            raise TlsConfigError(f"{setting}: the private key is encrypted, but ssl.key.password is not set")
        return label, _decode(keys[0], setting)
    if label != "PRIVATE KEY":
        raise TlsConfigError(
            f"{setting}: the private key is '{label}' (PKCS#1/SEC1); Kafka reads PKCS#8 only "
            "('PRIVATE KEY' or 'ENCRYPTED PRIVATE KEY'): convert it with `openssl pkcs8 -topk8`"
        )
    if password is not None:
        raise TlsConfigError("ssl.key.password: is set, but the private key is not encrypted (Kafka refuses this)")
    der = _decode(keys[0], setting)
    try:
        info = _tlv(der, 0, len(der))  # PrivateKeyInfo: version, AlgorithmIdentifier, key
        algorithm_identifier = _children(der, info[2], info[3])[1]
        oid = _oid(der, *_children(der, algorithm_identifier[2], algorithm_identifier[3])[0][1:])
    except (ValueError, IndexError):
        raise TlsConfigError(f"{setting}: the private key is not a PKCS#8 PrivateKeyInfo") from None
    if oid not in _KEY_ALGORITHMS:
        raise TlsConfigError(f"{setting}: the private key's algorithm {oid} is not RSA, DSA or EC, as Kafka requires")
    return label, der


_KEY_ALGORITHMS = {"1.2.840.113549.1.1.1": "RSA", "1.2.840.10040.4.1": "DSA", "1.2.840.10045.2.1": "EC"}


@contextlib.contextmanager
def _pem_file(text: str) -> Iterator[str]:
    """A path OpenSSL can read `text` from: an anonymous memory file where the system has them (the key never
    touches a disk), else a private temporary file removed at once."""
    data = text.encode()
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("kcoord-pem", getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    fd, path = tempfile.mkstemp(prefix="kcoord-pem-")  # mode 0600
    try:
        os.write(fd, data)
        os.close(fd)
        yield path
    finally:
        os.unlink(path)


def _read(path: str, setting: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError as e:
        raise TlsConfigError(f"{setting}={path}: cannot read it: {e.strerror or e}") from None


@dataclass(frozen=True)
class _Keystore:
    chain_pem: str  # the certificates, re-written as plain PEM for OpenSSL
    key_pem: str  # the key, likewise
    setting: str  # the setting to name in an error
    leaf: bytes  # the DER of the first certificate
    encrypted: bool  # the key is an ENCRYPTED PRIVATE KEY


def _keystore(s: TlsSettings) -> _Keystore:
    if s.keystore_key is not None and s.keystore_certificate_chain is not None:
        certs = _pem_certificates(s.keystore_certificate_chain, "ssl.keystore.certificate.chain")
        label, key = _private_key(s.keystore_key, "ssl.keystore.key", s.key_password)
        setting = "ssl.keystore.key"
    else:
        assert s.keystore_location is not None
        setting = "ssl.keystore.location"
        text = _read(s.keystore_location, setting)
        certs = _pem_certificates(text, setting)
        label, key = _private_key(text, setting, s.key_password)
    chain = "".join(_pem("CERTIFICATE", c) for c in certs)
    return _Keystore(chain, _pem(label, key), setting, certs[0], label == "ENCRYPTED PRIVATE KEY")


def _load_keystore(ctx: ssl.SSLContext, ks: _Keystore, key_password: str | None) -> None:
    with _pem_file(ks.chain_pem) as chain, _pem_file(ks.key_pem) as key:
        try:
            ctx.load_cert_chain(chain, key, password=key_password if key_password is not None else _no_password)
        except ssl.SSLError as e:
            reason = e.reason or str(e)
            if ks.encrypted and (e.reason in (None, "BAD_DECRYPT") or "decrypt" in str(e).lower()):
                # OpenSSL says only "PEM lib" for a wrong password
                raise TlsConfigError("ssl.key.password: the private key cannot be decrypted with it") from None
            raise TlsConfigError(f"{ks.setting}: the key and certificate chain cannot be loaded ({reason})") from None


def _no_password() -> str:
    raise TlsConfigError("ssl.key.password: the private key is encrypted, but ssl.key.password is not set")


def _load_truststore(ctx: ssl.SSLContext, s: TlsSettings) -> None:
    if s.truststore_certificates is not None:
        setting = "ssl.truststore.certificates"
        certs = _pem_certificates(s.truststore_certificates, setting)
    elif s.truststore_location is not None:
        setting = f"ssl.truststore.location={s.truststore_location}"
        certs = _pem_certificates(_read(s.truststore_location, "ssl.truststore.location"), "ssl.truststore.location")
    else:
        if s.client_auth != "none":
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)  # Java's default trust store (cacerts), as Kafka
        return
    try:
        ctx.load_verify_locations(cadata=b"".join(certs))
    except (ssl.SSLError, ValueError) as e:
        raise TlsConfigError(f"{setting}: the certificates cannot be loaded ({e})") from None


# ---------------------------------------------------------------------------------------------------------------
# Cipher suites

# Java's (IANA) names of TLS 1.2 suites -> OpenSSL's, as `openssl ciphers -stdname` lists them (OpenSSL 3.0): the
# suites a JDK enables by default, and the RSA key-exchange ones it can be told to.
JAVA_TO_OPENSSL: dict[str, str] = {
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_DSS_WITH_AES_256_GCM_SHA384": "DHE-DSS-AES256-GCM-SHA384",
    "TLS_DHE_DSS_WITH_AES_128_GCM_SHA256": "DHE-DSS-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_DHE_DSS_WITH_AES_256_CBC_SHA256": "DHE-DSS-AES256-SHA256",
    "TLS_DHE_DSS_WITH_AES_128_CBC_SHA256": "DHE-DSS-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA": "DHE-RSA-AES256-SHA",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA": "DHE-RSA-AES128-SHA",
    "TLS_DHE_DSS_WITH_AES_256_CBC_SHA": "DHE-DSS-AES256-SHA",
    "TLS_DHE_DSS_WITH_AES_128_CBC_SHA": "DHE-DSS-AES128-SHA",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
}
# TLS 1.3 suites have the same name in Java and OpenSSL. Python's ssl module cannot choose among them (it has no
# SSL_CTX_set_ciphersuites), so OpenSSL's three defaults are all on whenever TLS 1.3 is.
TLS13_SUITES = ("TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_GCM_SHA256")
SCSV = "TLS_EMPTY_RENEGOTIATION_INFO_SCSV"  # Java lists it among its suites; OpenSSL always sends it itself


@dataclass(frozen=True)
class _CipherPlan:
    openssl: str | None  # the OpenSSL cipher list for TLS 1.2, None for OpenSSL's default
    protocols: tuple[str, ...]  # the protocols that keep a suite


def _cipher_plan(suites: tuple[str, ...], protocols: tuple[str, ...]) -> _CipherPlan:
    """ssl.cipher.suites as Java applies it: a protocol with no enabled suite is never negotiated. kcoord refuses
    what OpenSSL through Python cannot do: a strict subset of the TLS 1.3 suites."""
    if not suites:
        return _CipherPlan(None, protocols)
    tls12: list[str] = []
    tls13: set[str] = set()
    for name in suites:
        if name in JAVA_TO_OPENSSL:
            tls12.append(JAVA_TO_OPENSSL[name])
        elif name in TLS13_SUITES:
            tls13.add(name)
        elif name != SCSV:
            raise TlsConfigError(
                f"ssl.cipher.suites: {name!r} is not a cipher suite kcoord knows (Java's names, for example "
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 or TLS_AES_128_GCM_SHA256)"
            )
    if tls13 and tls13 != set(TLS13_SUITES) and "TLSv1.3" in protocols:
        raise TlsConfigError(
            "ssl.cipher.suites: kcoord cannot enable only some TLS 1.3 suites; list all of "
            f"{', '.join(TLS13_SUITES)} or none (then TLS 1.3 is off)"
        )
    kept = tuple(p for p in protocols if (p == "TLSv1.2" and tls12) or (p == "TLSv1.3" and tls13))
    if not kept:
        raise TlsConfigError(
            f"ssl.cipher.suites: none of the suites listed serves an enabled protocol ({', '.join(protocols)})"
        )
    return _CipherPlan(":".join(tls12) if tls12 else None, kept)


# ---------------------------------------------------------------------------------------------------------------
# The context


class ServerContext(ssl.SSLContext):
    """The listener's context: an SSLContext that remembers its certificate's subject and SANs for `reload`."""

    kcoord_leaf: bytes = b""


def server_context(s: TlsSettings) -> ssl.SSLContext:
    """A server-side SSLContext for a listener with settings `s`, or TlsConfigError naming the setting."""
    with s.naming():
        return _server_context(s)


def _server_context(s: TlsSettings) -> ServerContext:
    s.validate()
    plan = _cipher_plan(s.cipher_suites, s.enabled_protocols)
    ctx = ServerContext(ssl.PROTOCOL_TLS_SERVER)
    levels = sorted(PROTOCOLS[p] for p in plan.protocols)
    ctx.minimum_version = levels[0]
    ctx.maximum_version = levels[-1]
    if plan.openssl is not None:
        try:
            ctx.set_ciphers(plan.openssl)
        except ssl.SSLError:
            raise TlsConfigError(
                "ssl.cipher.suites: none of the TLS 1.2 suites listed is available in this OpenSSL"
            ) from None
        have = {c["name"] for c in ctx.get_ciphers()}
        for java, openssl in JAVA_TO_OPENSSL.items():
            if java in s.cipher_suites and openssl not in have:
                raise TlsConfigError(
                    f"ssl.cipher.suites: {java} is not available in this OpenSSL ({ssl.OPENSSL_VERSION})"
                )
    ctx.options |= getattr(ssl, "OP_NO_RENEGOTIATION", 0)  # Kafka's SslTransportLayer refuses renegotiation too
    ks = _keystore(s)
    _load_keystore(ctx, ks, s.key_password)
    ctx.kcoord_leaf = ks.leaf
    ctx.verify_mode = CLIENT_AUTH[s.client_auth]
    _load_truststore(ctx, s)
    return ctx


def reload(ctx: ssl.SSLContext, s: TlsSettings) -> None:
    """Load a renewed key and certificate (and any new trusted certificates) into `ctx`: connections accepted
    afterwards use them, established ones keep their session. As Kafka's SslFactory, the new certificate's subject
    DN and SANs must equal the old one's unless ssl.allow.dn.changes / ssl.allow.san.changes is true. The new key
    and chain are first loaded into a scratch context, so a refused reload leaves `ctx` as it was.

    What differs from Kafka: Kafka compares DNs in X500Principal's canonical form (case and spaces folded); kcoord
    compares the RFC 2253 strings, so a change of case also needs ssl.allow.dn.changes. Trusted certificates are
    added, never removed (OpenSSL's store only grows): removing a CA needs a restart."""
    with s.naming():
        _reload(ctx, s)


def _reload(ctx: ssl.SSLContext, s: TlsSettings) -> None:
    s.validate()
    ks = _keystore(s)
    scratch = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_keystore(scratch, ks, s.key_password)
    old = getattr(ctx, "kcoord_leaf", b"")
    if old:
        if not s.allow_dn_changes and subject_dn(old) != subject_dn(ks.leaf):
            raise TlsConfigError(
                f"{ks.setting}: the new certificate's subject DN {subject_dn(ks.leaf)!r} differs from the current "
                f"{subject_dn(old)!r} (set ssl.allow.dn.changes=true to allow it)"
            )
        if not s.allow_san_changes and subject_alt_names(old) != subject_alt_names(ks.leaf):
            raise TlsConfigError(
                f"{ks.setting}: the new certificate's subject alternative names differ from the current ones "
                "(set ssl.allow.san.changes=true to allow it)"
            )
    if s.truststore_certificates is not None or s.truststore_location is not None:
        _load_truststore(scratch, s)
        _load_truststore(ctx, s)
    _load_keystore(ctx, ks, s.key_password)
    if isinstance(ctx, ServerContext):
        ctx.kcoord_leaf = ks.leaf


# ---------------------------------------------------------------------------------------------------------------
# The principal


def peer_principal(ssl_object: Any, rules: PrincipalMapper | str) -> str:
    """The principal of a connection's TLS peer (DefaultKafkaPrincipalBuilder): `User:ANONYMOUS` without a peer
    certificate, else `User:` + its subject DN as Java's X500Principal.getName() writes it, mapped by
    ssl.principal.mapping.rules. Raises NoMatchingRule when no rule applies (Kafka fails the authentication)."""
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return ANONYMOUS
    mapper = rules if isinstance(rules, PrincipalMapper) else PrincipalMapper(rules)
    return "User:" + mapper.name(subject_dn(der))


# A small DER reader: enough of X.509 for the subject and the SANs of a certificate OpenSSL has already parsed.


def _tlv(der: bytes, pos: int, end: int) -> tuple[int, int, int, int]:
    """(tag, start of the element, start of its content, end of its content) of the element at `pos`."""
    if pos + 2 > end:
        raise ValueError("truncated DER")
    tag = der[pos]
    if tag & 0x1F == 0x1F:
        raise ValueError("high tag numbers are not used in certificates")
    length = der[pos + 1]
    content = pos + 2
    if length & 0x80:
        n = length & 0x7F
        if n == 0 or n > 4 or content + n > end:
            raise ValueError("bad DER length")
        length = int.from_bytes(der[content : content + n], "big")
        content += n
    if content + length > end:
        raise ValueError("truncated DER")
    return tag, pos, content, content + length


def _children(der: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """The elements inside [start, end) (give it an element's (content, end) to list a SEQUENCE's or SET's)."""
    out = []
    pos = start
    while pos < end:
        t = _tlv(der, pos, end)
        out.append(t)
        pos = t[3]
    return out


def _oid(der: bytes, start: int, content: int, end: int) -> str:
    if der[start] != 0x06:
        raise ValueError("expected an OBJECT IDENTIFIER")
    arcs: list[int] = []
    value = 0
    for b in der[content:end]:
        value = (value << 7) | (b & 0x7F)
        if not b & 0x80:
            arcs.append(value)
            value = 0
    if not arcs:
        raise ValueError("empty OBJECT IDENTIFIER")
    first = arcs[0]
    head = [0, first] if first < 40 else [1, first - 40] if first < 80 else [2, first - 80]
    return ".".join(str(a) for a in head + arcs[1:])


def _tbs_fields(der: bytes) -> list[tuple[int, int, int, int]]:
    cert = _tlv(der, 0, len(der))
    tbs = _children(der, cert[2], cert[3])[0]
    items = _children(der, tbs[2], tbs[3])
    return items[1:] if items and items[0][0] == 0xA0 else items  # without the [0] version


# Java's RFC 2253 keywords (sun.security.x509.AVAKeyword entries marked RFC 2253 compliant)
RFC2253_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# AVA.isDerString (not canonical) and AVA.getCharset: the string types and how Java decodes them
_STRING_TAGS = {0x0C: "utf-8", 0x13: "latin-1", 0x14: "latin-1", 0x16: "latin-1", 0x1B: "latin-1", 0x1E: "utf-16-be"}
_ESCAPEES = ',=+<>#;"\\'


def _ava_rfc2253(der: bytes, ava: tuple[int, int, int, int]) -> str:
    """AVA.toRFC2253String: the keyword (or dotted OID), '=', then the value: a string type's text with RFC 2253
    escapes, else '#' and the lower-case hex of the value's BER (always so for a dotted OID)."""
    oid_tlv, value = _children(der, ava[2], ava[3])[:2]
    oid = _oid(der, *oid_tlv[1:])
    keyword = RFC2253_KEYWORDS.get(oid, oid)
    tag = value[0]
    if keyword[0].isdigit() or tag not in _STRING_TAGS:
        return f"{keyword}=#{der[value[1] : value[3]].hex()}"
    text = der[value[2] : value[3]].decode(_STRING_TAGS[tag], errors="replace")
    out = []
    for c in text:
        if c in _ESCAPEES:
            out.append("\\" + c)
        elif c == "\0":
            out.append("\\00")
        else:
            out.append(c)
    chars = "".join(out)
    lead = 0
    while lead < len(chars) and chars[lead] in " \r":
        lead += 1
    trail = len(chars) - 1
    while trail >= 0 and chars[trail] in " \r":
        trail -= 1
    return keyword + "=" + "".join("\\" + c if i < lead or i > trail else c for i, c in enumerate(chars))


def subject_dn(der: bytes) -> str:
    """A DER certificate's subject as Java's X500Principal.getName() (RFC 2253) gives it: the most specific RDN
    first, RDNs joined by ',' and a multi-valued RDN's AVAs by '+' in their encoded order."""
    try:
        subject = _tbs_fields(der)[4]  # serialNumber, signature, issuer, validity, subject
        rdns = _children(der, subject[2], subject[3])
        return ",".join(
            "+".join(_ava_rfc2253(der, ava) for ava in _children(der, rdn[2], rdn[3])) for rdn in reversed(rdns)
        )
    except (ValueError, IndexError) as e:
        raise ValueError(f"cannot read the certificate's subject: {e}") from None


def subject_alt_names(der: bytes) -> frozenset[bytes]:
    """The DER of each GeneralName in a certificate's subjectAltName extension (empty without one)."""
    try:
        for item in _tbs_fields(der)[6:]:
            if item[0] != 0xA3:
                continue
            extensions = _children(der, item[2], item[3])[0]
            for ext in _children(der, extensions[2], extensions[3]):
                parts = _children(der, ext[2], ext[3])
                if _oid(der, *parts[0][1:]) == "2.5.29.17":
                    octets = parts[-1]
                    names = _children(der, octets[2], octets[3])[0]
                    return frozenset(der[n[1] : n[3]] for n in _children(der, names[2], names[3]))
        return frozenset()
    except (ValueError, IndexError) as e:
        raise ValueError(f"cannot read the certificate's subject alternative names: {e}") from None


# ---------------------------------------------------------------------------------------------------------------
# ssl.principal.mapping.rules (SslPrincipalMapper)

_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)
_BACK_REFERENCE = re.compile(r"\$(\d+)")
_JAVA_NAMED_GROUP = re.compile(r"\(\?<([a-zA-Z][a-zA-Z0-9]*)>")


class _Rule:
    def __init__(self, pattern: str | None = None, replacement: str = "", lower: bool = False, upper: bool = False):
        self.is_default = pattern is None
        self.source = pattern
        self.replacement = replacement
        self.lower = lower
        self.upper = upper
        self.regex: re.Pattern[str] | None = None
        if pattern is not None:
            try:
                # Java's named groups (?<name>...) are Python's (?P<name>...); the rest of the syntax Kafka's
                # examples use is common to both
                self.regex = re.compile(_JAVA_NAMED_GROUP.sub(r"(?P<\1>", pattern))
            except re.error as e:
                raise TlsConfigError(f"ssl.principal.mapping.rules: invalid regex in rule `{self}`: {e}") from None
            self.expanded = _escape_literal_back_references(replacement, self.regex.groups)
            # A replacement Java's Matcher would refuse fails every connection whose DN the rule matches, in Kafka;
            # kcoord refuses it at start instead
            try:
                _java_replacement(self.expanded, self.regex.match(""), self.regex, check_only=True)
            except _ReplacementError as e:
                raise TlsConfigError(f"ssl.principal.mapping.rules: rule `{self}`: {e}") from None

    def apply(self, dn: str) -> str | None:
        if self.is_default:
            return dn
        regex = self.regex
        assert regex is not None
        if not regex.fullmatch(dn):
            return None
        # dn.replaceAll(pattern, replacement): every match, as Java's Matcher finds them
        result = regex.sub(lambda m: _java_replacement(self.expanded, m, regex), dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result

    def __str__(self) -> str:  # SslPrincipalMapper.Rule.toString
        if self.is_default:
            return "DEFAULT"
        text = "RULE:" + (self.source or "")
        text += "/" + self.replacement
        if self.lower:
            text += "/L"
        elif self.upper:
            text += "/U"
        return text


def _escape_literal_back_references(unescaped: str, groups: int) -> str:
    """SslPrincipalMapper.Rule.escapeLiteralBackReferences, quirks included: $123 falls back to $12 then $1 while
    the group does not exist, and a reference to a missing group is made literal ('\\$'). The positions come from
    the original text while the inserts shift the copy, exactly as Kafka's loop does."""
    if groups == 0:
        return unescaped
    value = unescaped
    for m in _BACK_REFERENCE.finditer(unescaped):
        num = m.group(1)
        if num.startswith("0"):
            continue
        index = int(num)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            start = m.start(1)
            value = value[: start - 1] + "\\" + value[start - 1 :]
    return value


class _ReplacementError(Exception):
    pass


def _java_replacement(
    replacement: str, m: re.Match[str] | None, regex: re.Pattern[str], check_only: bool = False
) -> str:
    """Java's Matcher.appendReplacement: '\\x' is x, '$n' takes the longest group number that exists (its first
    digit always counts), '${name}' a named group, an unmatched group adds nothing."""
    out = []
    i = 0
    n = len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\":
            i += 1
            if i == n:
                raise _ReplacementError("character to be escaped is missing")
            out.append(replacement[i])
            i += 1
        elif c == "$":
            i += 1
            if i == n:
                raise _ReplacementError("Illegal group reference: group index is missing")
            if replacement[i] == "{":
                close = replacement.find("}", i)
                name = replacement[i + 1 : close] if close > 0 else ""
                if close < 0 or not re.fullmatch(r"[a-zA-Z][a-zA-Z0-9]*", name):
                    raise _ReplacementError("named capturing group is missing trailing '}' or has a bad name")
                if name not in regex.groupindex:
                    raise _ReplacementError(f"No group with name {{{name}}}")
                group: int | str = name
                i = close + 1
            else:
                if not replacement[i].isdigit() or not "0" <= replacement[i] <= "9":
                    raise _ReplacementError("Illegal group reference")
                ref = int(replacement[i])
                i += 1
                while i < n and "0" <= replacement[i] <= "9":
                    longer = ref * 10 + int(replacement[i])
                    if longer > regex.groups:
                        break
                    ref = longer
                    i += 1
                if ref > regex.groups:
                    raise _ReplacementError(f"No group {ref}")
                group = ref
            if not check_only and m is not None and m.group(group) is not None:
                out.append(m.group(group))
        else:
            out.append(c)
            i += 1
    return "".join(out)


class PrincipalMapper:
    """ssl.principal.mapping.rules: rules separated by commas, each `DEFAULT` or `RULE:regex/replacement/[L|U]`
    ('\\' escapes '/' and '\\'), tried in order; a RULE applies when its regex matches the whole DN, and gives
    dn.replaceAll(regex, replacement) with Java's $n references, lower- or upper-cased with /L or /U. An invalid
    rule is a TlsConfigError naming the setting."""

    def __init__(self, rules: str | None = "DEFAULT"):
        text = "DEFAULT" if rules is None else rules
        parts = [m.group(1) for m in _RULE_SPLITTER.finditer(text.strip())]
        self.rules: list[_Rule] = []
        for rule in parts:
            m = _RULE_PARSER.match(rule)
            if m is None:
                raise TlsConfigError(f"ssl.principal.mapping.rules: invalid rule `{rule}`")
            if m.end() != len(rule):
                raise TlsConfigError(
                    f"ssl.principal.mapping.rules: invalid rule `{rule}`, unmatched substring `{rule[m.end() :]}`"
                )
            if m.group(1) is not None:
                self.rules.append(_Rule())
            elif m.group(2) is not None:
                self.rules.append(_Rule(m.group(2), m.group(4), m.group(6) == "L", m.group(6) == "U"))
            # an empty entry is ignored

    def name(self, dn: str) -> str:
        """The name the first applicable rule gives `dn`, or NoMatchingRule."""
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRule(f"No rules apply to {dn}, rules [{', '.join(str(r) for r in self.rules)}]")

    def __str__(self) -> str:  # SslPrincipalMapper.toString
        return f"SslPrincipalMapper(rules = [{', '.join(str(r) for r in self.rules)}])"
