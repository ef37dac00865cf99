"""Policy construction: every policy reports `[<policy-name>] <resource>: <what is wrong>`,
so a violation names the rule and the resource even where the CLI shows only the message."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from . import k8s


@dataclass(frozen=True)
class Subject:
    """One resource as a rule sees it (from a resource or a stack validation)."""

    resource_type: str
    props: Mapping[str, Any]
    name: str
    urn: str

    @property
    def gk(self) -> k8s.GroupKind | None:
        return k8s.group_kind(self.resource_type, self.props)

    def is_kind(self, group: str, kind: str) -> bool:
        return self.gk == (group, kind)

    @property
    def label(self) -> str:
        return k8s.describe(self.resource_type, self.props, self.name)

    @property
    def k8s_name(self) -> str:
        return k8s.metadata_name(self.props, self.name)

    @property
    def namespace(self) -> str | None:
        return k8s.namespace_of(self.props)


ResourceCheck = Callable[[Subject, Mapping[str, Any]], Iterable[str]]
# A stack check yields (message, urn of the offending resource or None for the stack).
StackCheck = Callable[[list[Any], Mapping[str, Any]], Iterable[tuple[str, str | None]]]


def subject_of(resource: Any) -> Subject:
    return Subject(resource.resource_type, resource.props, resource.name, resource.urn)


def resource_policy(
    *,
    name: str,
    description: str,
    remediation: str,
    check: ResourceCheck,
    level: EnforcementLevel = EnforcementLevel.MANDATORY,
    severity: Severity = Severity.HIGH,
    config: PolicyConfigSchema | None = None,
) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        subject = Subject(args.resource_type, args.props, args.name, args.urn)
        for message in check(subject, args.get_config() or {}):
            report_violation(f"[{name}] {message}", None)

    return ResourceValidationPolicy(
        name=name,
        description=description,
        validate=validate,
        enforcement_level=level,
        config_schema=config,
        severity=severity,
        remediation_steps=remediation,
    )


def stack_policy(
    *,
    name: str,
    description: str,
    remediation: str,
    check: StackCheck,
    level: EnforcementLevel = EnforcementLevel.MANDATORY,
    severity: Severity = Severity.HIGH,
    config: PolicyConfigSchema | None = None,
) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        for message, urn in check(list(args.resources), args.get_config() or {}):
            report_violation(f"[{name}] {message}", urn)

    return StackValidationPolicy(
        name=name,
        description=description,
        validate=validate,
        enforcement_level=level,
        config_schema=config,
        severity=severity,
        remediation_steps=remediation,
    )


def of_kind(resources: Iterable[Any], group: str, kind: str) -> list[Subject]:
    subjects = (subject_of(r) for r in resources)
    return [s for s in subjects if s.is_kind(group, kind)]
