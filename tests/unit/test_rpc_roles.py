"""The Engine service's table of roles: every RPC of the proto has one, nothing else does, and
what is not in it is refused (default deny)."""

from __future__ import annotations

from sagaway.principals import ALL_ROLES, Principal, Role
from sagaway.server import roles
from sagaway.v1 import engine_pb2 as pb

METHODS = set(pb.DESCRIPTOR.services_by_name["Engine"].methods_by_name)


def test_every_rpc_of_the_proto_has_a_role_and_the_table_names_only_rpcs() -> None:
    assert METHODS, "the proto has methods"
    missing = sorted(METHODS - set(roles.RPC_ROLES))
    assert not missing, f"RPCs without a role in sagaway.server.roles.RPC_ROLES: {missing}"
    stale = sorted(set(roles.RPC_ROLES) - METHODS)
    assert not stale, f"roles given to RPCs the proto does not have: {stale}"
    assert set(roles.CONDITIONS) <= METHODS


def test_a_call_not_in_the_table_is_refused_even_to_admin() -> None:
    admin = Principal("root", ALL_ROLES)
    why = roles.refusal(admin, "DropDatabase")
    assert why is not None and "DropDatabase" in why and "no role may" in why
    assert roles.refusal(None, "Hello") is not None  # no principal at all
    assert roles.refusal(admin, "PurgeEnded") is None


def test_a_refusal_names_the_principal_the_call_and_the_role_it_needs() -> None:
    reader = Principal("dashboard", frozenset({Role.READ}))
    assert roles.refusal(reader, "RequestCancel") == (
        "principal 'dashboard' (roles: read) may not call RequestCancel: it needs one of the "
        "roles operate, worker"
    )
    assert roles.refusal(reader, "PurgeEnded") == (
        "principal 'dashboard' (roles: read) may not call PurgeEnded: it needs the role admin"
    )
    nobody = Principal("nobody", frozenset())
    assert roles.refusal(nobody, "Hello") is None
    assert "(roles: none)" in (roles.refusal(nobody, "GetWorkflow") or "")


def test_conditions_of_create_workflow() -> None:
    operator = Principal("ops", frozenset({Role.OPERATE}))
    worker = Principal("w", frozenset({Role.WORKER}))
    admin = Principal("a", frozenset({Role.ADMIN}))
    plain = pb.CreateWorkflowRequest()
    replacing = pb.CreateWorkflowRequest(replace_live=True)
    leased = pb.CreateWorkflowRequest(lease=pb.Lease(token="t", owner="o", expires_at=1.0))
    assert roles.refusal(operator, "CreateWorkflow", plain) is None
    assert roles.refusal(worker, "CreateWorkflow", plain) is None
    why = roles.refusal(operator, "CreateWorkflow", replacing) or ""
    assert "replacing a live execution" in why and "the role admin" in why
    assert roles.refusal(worker, "CreateWorkflow", replacing) is not None
    assert roles.refusal(admin, "CreateWorkflow", replacing) is None
    assert "under a lease" in (roles.refusal(operator, "CreateWorkflow", leased) or "")
    assert roles.refusal(worker, "CreateWorkflow", leased) is None
    # Without the parsed request only the method is judged (the guard refuses bad bytes).
    assert roles.refusal(operator, "CreateWorkflow") is None
