"""A server with an authorizer (issue 32), in process, for the tests of authorization on the wire: listener INTERNAL
(PLAINTEXT, whose principal User:ANONYMOUS is a super user: the tests' administrator) and SASL (SASL_PLAINTEXT,
SCRAM-SHA-256) for the users under test; ACLs made and removed through Kafka's ACL APIs on INTERNAL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client, ClientSecurity
from kcoord.security.authorizer import (
    ALLOW,
    ANY,
    LITERAL,
    OPERATIONS,
    PATTERN_TYPES,
    PERMISSIONS,
    RESOURCE_TYPES,
)

from .secured import add_users
from .servers import ThreadServer, free_port

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PASSWORD = "secret-pw"
MECHANISM = "SCRAM-SHA-256"


class AuthorizedServer:
    """`users` each get a SCRAM-SHA-256 credential (password PASSWORD); `config` are more ServerConfig fields."""

    def __init__(self, users=("alice", "bob", "eve"), records=None, **config) -> None:
        internal, sasl = free_port(), free_port()
        settings = {"authorizer_class_name": STANDARD_AUTHORIZER, "super_users": "User:ANONYMOUS", **config}
        self.thread = ThreadServer(records, listeners=f"INTERNAL://127.0.0.1:{internal},SASL://127.0.0.1:{sasl}",
                                   listener_security_protocol_map="INTERNAL:PLAINTEXT,SASL:SASL_PLAINTEXT",
                                   sasl_enabled_mechanisms=MECHANISM, **settings)
        if self.thread.error is not None:
            raise self.thread.error
        self.server = self.thread.server
        self.bootstrap = f"127.0.0.1:{internal}"  # the administrator's (User:ANONYMOUS, a super user)
        self.sasl = f"127.0.0.1:{sasl}"
        if users:
            add_users(self.bootstrap, {u: (MECHANISM, PASSWORD) for u in users})

    def close(self) -> None:
        self.thread.close()

    def security(self, user: str) -> ClientSecurity:
        return ClientSecurity(security_protocol="SASL_PLAINTEXT", sasl_mechanism=MECHANISM, sasl_username=user,
                              sasl_password=PASSWORD)

    @contextmanager
    def user(self, name: str) -> Iterator[Client]:
        """A client authenticated as `name` (User:<name>) on the SASL listener."""
        with Client(self.sasl, client_id=f"{name}-client", security=self.security(name)) as c:
            yield c

    @contextmanager
    def admin(self) -> Iterator[Client]:
        with Client(self.bootstrap, client_id="admin") as c:
            yield c

    # ---- ACLs ----------------------------------------------------------------------------------------------

    def grant(self, resource: str, name: str, operation: str, principal: str, *, pattern: str = "LITERAL",
              permission: str = "ALLOW", host: str = "*") -> None:
        """One ACL, e.g. grant("GROUP", "g", "READ", "alice"); a principal without a type is a User."""
        if ":" not in principal:
            principal = f"User:{principal}"
        with self.admin() as c:
            r = c.call(30, 3, wire.CreateAclsRequest(creations=[wire.CreateAclsRequestAclCreation(
                resource_type=RESOURCE_TYPES[resource], resource_name=name,
                resource_pattern_type=PATTERN_TYPES[pattern], principal=principal, host=host,
                operation=OPERATIONS[operation], permission_type=PERMISSIONS[permission])]))
        assert [(x.error_code, x.error_message) for x in r.results] == [(E.NONE, None)], r

    def deny(self, resource: str, name: str, operation: str, principal: str, **kw) -> None:
        self.grant(resource, name, operation, principal, permission="DENY", **kw)

    def revoke_all(self) -> int:
        """Every ACL goes; how many there were."""
        with self.admin() as c:
            r = c.call(31, 3, wire.DeleteAclsRequest(filters=[wire.DeleteAclsRequestDeleteAclsFilter(
                resource_type_filter=ANY, resource_name_filter=None, pattern_type_filter=ANY, principal_filter=None,
                host_filter=None, operation=ANY, permission_type=ANY)]))
        assert r.filter_results[0].error_code == E.NONE, r
        return len(r.filter_results[0].matching_acls)

    def acls(self) -> list[tuple[str, str, str, str, str, str, str]]:
        """Every ACL as (resource type, name, pattern, principal, host, operation, permission) names, sorted."""
        names = {t: {v: k for k, v in d.items()} for t, d in (("r", RESOURCE_TYPES), ("p", PATTERN_TYPES),
                                                              ("o", OPERATIONS), ("m", PERMISSIONS))}
        with self.admin() as c:
            r = c.call(29, 3, wire.DescribeAclsRequest(
                resource_type_filter=ANY, resource_name_filter=None, pattern_type_filter=ANY, principal_filter=None,
                host_filter=None, operation=ANY, permission_type=ANY))
        assert r.error_code == E.NONE, r
        return sorted((names["r"][res.resource_type], res.resource_name, names["p"][res.pattern_type], a.principal,
                       a.host, names["o"][a.operation], names["m"][a.permission_type])
                      for res in r.resources for a in res.acls)


__all__ = ["ALLOW", "LITERAL", "AuthorizedServer", "PASSWORD", "STANDARD_AUTHORIZER"]
