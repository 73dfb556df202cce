"""The deployment artifacts in deploy/, checked without Docker or a cluster.

`compose.yaml` is validated against the Compose Specification's JSON schema and every Kubernetes
manifest against the Kubernetes API's strict JSON schemas, both read from pinned packages (so no
network is needed). The tests then hold the layout they promise: one image for every goldenset
process, API replicas that never run the scheduler, exactly one scheduler, a migration that runs
first, probes, limits and non-root pods, and settings that are real `GOLDENSET_*` settings and
start (or refuse to start, naming the variable) as documented.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Iterator, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaError
from pydantic import ValidationError
from referencing import Registry, Resource

from service.core.settings import ENV_PREFIX, Settings

REPO_ROOT = Path(__file__).resolve().parents[3]
DEPLOY = REPO_ROOT / "deploy"
K8S = DEPLOY / "k8s"
# The oldest Kubernetes minor still commonly run, and the newest the schema package ships.
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")
SETTING_VARIABLES = frozenset(ENV_PREFIX + name.upper() for name in Settings.model_fields)
VARIABLE = re.compile(r"\bGOLDENSET_[A-Z0-9_]+\b")
POD_KINDS = {"Deployment", "Job", "CronJob"}


# --- loading ---------------------------------------------------------------------------------


def _load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _compose() -> dict[str, Any]:
    document = _load_yaml(DEPLOY / "compose.yaml")
    assert isinstance(document, dict)
    return document


def _manifest_files() -> list[Path]:
    return sorted(path for path in K8S.glob("*.yaml") if path.name != "kustomization.yaml")


def _manifests() -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = []
    for path in _manifest_files():
        documents.extend(document for document in yaml.safe_load_all(path.read_text(encoding="utf-8")) if document is not None)
    return documents


def _only(kind: str, component: str | None = None) -> dict[str, Any]:
    found = [doc for doc in _manifests() if doc["kind"] == kind and (component is None or doc["metadata"]["labels"].get("app.kubernetes.io/component") == component)]
    assert len(found) == 1, f"expected one {kind} {component or ''}, found {len(found)}"
    return found[0]


def _pod_spec(workload: Mapping[str, Any]) -> dict[str, Any]:
    spec = workload["spec"]["jobTemplate"]["spec"] if workload["kind"] == "CronJob" else workload["spec"]
    pod: dict[str, Any] = spec["template"]["spec"]
    return pod


def _workloads() -> Iterator[dict[str, Any]]:
    return (doc for doc in _manifests() if doc["kind"] in POD_KINDS)


def _command(container: Mapping[str, Any]) -> list[str]:
    return [*container.get("command", []), *container.get("args", [])]


def _read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines as compose reads an env file (comments and blank lines skipped)."""
    values = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        name, separator, value = stripped.partition("=")
        assert separator, f"{path.name}: not KEY=VALUE: {line!r}"
        # Quotes and inline comments read differently in compose, shells and Kubernetes: none here.
        assert not value.startswith(("'", '"')) and " #" not in value, f"{path.name}: {name} must be a bare value"
        values[name.strip()] = value
    return values


def _schema_errors(validator: Draft202012Validator, document: Any) -> list[str]:
    errors: list[SchemaError] = sorted(validator.iter_errors(document), key=lambda error: list(map(str, error.absolute_path)))
    return [f"/{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in errors]


# --- schemas -----------------------------------------------------------------------------------


@cache
def _compose_validator() -> Draft202012Validator:
    # check-jsonschema ships the Compose Specification's own schema (compose-spec/compose-spec).
    text = resources.files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json").read_text(encoding="utf-8")
    schema = json.loads(text)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@cache
def _kubernetes_validator(version: str, api_version: str, kind: str) -> Draft202012Validator:
    # kubernetes-validate ships the Kubernetes API's JSON schemas per minor version; the strict
    # ones refuse unknown fields, so a misspelt or misplaced key fails here rather than being dropped.
    folder = resources.files("kubernetes_validate").joinpath("kubernetes-json-schema", f"v{version}-local-strict")
    group, _, group_version = api_version.rpartition("/")
    name = f"{kind.lower()}-{group.split('.')[0]}-{group_version}.json" if group else f"{kind.lower()}-{group_version}.json"
    schema_file = folder.joinpath(name)
    assert schema_file.is_file(), f"Kubernetes {version} has no {kind} in {api_version}"
    definitions = Resource.from_contents(json.loads(folder.joinpath("_definitions.json").read_text(encoding="utf-8")))
    return Draft202012Validator(json.loads(schema_file.read_text(encoding="utf-8")), registry=definitions @ Registry())


def test_compose_file_follows_the_compose_specification() -> None:
    assert _schema_errors(_compose_validator(), _compose()) == []


def test_the_schemas_refuse_a_broken_document() -> None:
    # The checks above would pass vacuously with a schema that accepts anything.
    broken_compose = _compose()
    broken_compose["services"]["api"]["depends_on"]["migrate"]["condition"] = "service_finished"
    broken_compose["services"]["api"]["helthcheck"] = {}
    assert len(_schema_errors(_compose_validator(), broken_compose)) == 2
    deployment = _only("Deployment", "api")
    deployment["spec"]["replica"] = 2
    _pod_spec(deployment)["containers"][0]["resources"]["limits"]["memory"] = ["2Gi"]
    assert len(_schema_errors(_kubernetes_validator(KUBERNETES_VERSIONS[0], "apps/v1", "Deployment"), deployment)) == 2


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_follows_the_kubernetes_schemas(version: str) -> None:
    problems = {}
    for document in _manifests():
        errors = _schema_errors(_kubernetes_validator(version, document["apiVersion"], document["kind"]), document)
        if errors:
            problems[f"{document['kind']}/{document['metadata']['name']}"] = errors
    assert problems == {}


# --- compose: interpolation and settings ---------------------------------------------------------

INTERPOLATION = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<named>[A-Za-z_][A-Za-z0-9_]*))")
BRACED = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<operator>:?[-?+])(?P<argument>.*))?", re.DOTALL)


class MissingVariableError(Exception):
    """What `docker compose config` stops with when a required variable has no value."""


def _interpolate_text(text: str, env: Mapping[str, str]) -> str:
    """Compose's variable syntax: $$, $VAR, ${VAR}, ${VAR:-default}, ${VAR-default},
    ${VAR:?error}, ${VAR?error}, ${VAR:+replacement} and ${VAR+replacement}."""

    def substitute(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        if match["named"]:
            return env.get(match["named"], "")
        braced = BRACED.fullmatch(match["braced"])
        assert braced, f"unsupported interpolation {match[0]!r}"
        name, operator, argument = braced["name"], braced["operator"], braced["argument"] or ""
        assert "$" not in argument, f"nested interpolation in {match[0]!r}"
        value = env.get(name)
        present = value is not None and (value != "" or not operator or not operator.startswith(":"))
        if operator in (":-", "-"):
            return value if present and value is not None else argument
        if operator in (":?", "?"):
            if not present or value is None:
                raise MissingVariableError(f"required variable {name} is missing a value: {argument}")
            return value
        if operator in (":+", "+"):
            return argument if present else ""
        return value or ""

    return INTERPOLATION.sub(substitute, text)


def _interpolate(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return _interpolate_text(node, env)
    if isinstance(node, list):
        return [_interpolate(item, env) for item in node]
    if isinstance(node, dict):
        return {key: _interpolate(value, env) for key, value in node.items()}
    return node


def _dockerfile_env() -> dict[str, str]:
    """The image's ENV defaults (continuation lines joined)."""
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    values = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            for pair in line.removeprefix("ENV ").split():
                name, _, value = pair.partition("=")
                values[name] = value
    return values


def _settings_from(env: Mapping[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings as a process whose environment is exactly `env` reads them."""
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings(_env_file=None)


def _goldenset_services(compose: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: service for name, service in compose["services"].items() if service.get("command", [None])[0] == "goldenset"}


def _container_env(service: Mapping[str, Any], env_file: Mapping[str, str]) -> dict[str, str]:
    """What a compose goldenset container sees: the image's ENV, then env_file, then environment."""
    assert service["env_file"] == ".env"
    environment = service.get("environment", {})
    assert isinstance(environment, dict), "environment as a mapping, so that the files read alike"
    return {**_dockerfile_env(), **env_file, **{name: str(value) for name, value in environment.items()}}


def test_env_example_as_copied_stops_compose_naming_the_secret_key() -> None:
    env = _read_env_file(DEPLOY / "env.example")
    with pytest.raises(MissingVariableError, match=r"GOLDENSET_SECRET_KEY .*set GOLDENSET_SECRET_KEY in deploy/\.env .*at least 32.*secrets\.token_urlsafe"):
        _interpolate(_compose(), env)


def test_env_example_with_a_secret_key_starts_every_goldenset_process(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**_read_env_file(DEPLOY / "env.example"), "GOLDENSET_SECRET_KEY": secrets.token_urlsafe(48)}
    compose = _interpolate(_compose(), env)
    assert _schema_errors(_compose_validator(), compose) == []
    postgres = compose["services"]["postgres"]["environment"]
    services = _goldenset_services(compose)
    assert set(services) == {"migrate", "api", "scheduler"}
    for name, service in services.items():
        settings = _settings_from(_container_env(service, env), monkeypatch)
        assert settings.env == "production", name
        assert not settings.uses_development_secret_key, name
        database = urlsplit(settings.database_url)
        assert database.scheme.startswith("postgresql"), name
        assert (database.hostname, database.username, database.password, database.path) == (
            "postgres",
            postgres["POSTGRES_USER"],
            postgres["POSTGRES_PASSWORD"],
            f"/{postgres['POSTGRES_DB']}",
        ), f"{name} must reach compose's postgres service with its credentials"


def test_env_example_names_what_production_requires() -> None:
    env = _read_env_file(DEPLOY / "env.example")
    assert env["GOLDENSET_ENV"] == "production"
    assert {"GOLDENSET_SECRET_KEY", "GOLDENSET_DATABASE_URL"} <= set(env)
    # The secret is left for the operator; any other setting is set or commented out, never empty
    # (an empty GOLDENSET_ADMIN_TOKEN is a value, and production refuses it).
    assert [name for name, value in env.items() if value == "" and name != "GOLDENSET_SECRET_KEY"] == []
    assert urlsplit(env["GOLDENSET_DATABASE_URL"]).password == env["POSTGRES_PASSWORD"]


def test_every_goldenset_variable_in_deploy_is_a_setting() -> None:
    files = [DEPLOY / "env.example", DEPLOY / "compose.yaml", DEPLOY / "Dockerfile", DEPLOY / "nginx.conf", *K8S.glob("*.yaml")]
    named = {path.relative_to(REPO_ROOT).as_posix(): set(VARIABLE.findall(path.read_text(encoding="utf-8"))) for path in files}
    unknown = {path: sorted(names - SETTING_VARIABLES) for path, names in named.items() if names - SETTING_VARIABLES}
    assert unknown == {}, f"not settings of service.core.settings.Settings: {unknown}"
    assert {"GOLDENSET_SECRET_KEY", "GOLDENSET_DATABASE_URL"} <= named["deploy/compose.yaml"]


# --- compose: the layout ---------------------------------------------------------------------------


def test_every_goldenset_process_in_compose_runs_the_same_image() -> None:
    services = _goldenset_services(_compose())
    images = {(service["image"], json.dumps(service["build"], sort_keys=True)) for service in services.values()}
    assert len(images) == 1
    build = services["api"]["build"]
    assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"


def test_compose_migrates_once_before_any_goldenset_process_starts() -> None:
    services = _goldenset_services(_compose())
    migrate = services["migrate"]
    assert migrate["command"] == ["goldenset", "migrate"]
    assert migrate["restart"] == "no"
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("api", "scheduler"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy", name


def test_compose_runs_api_replicas_without_the_scheduler_and_exactly_one_scheduler() -> None:
    services = _goldenset_services(_compose())
    serving = {name: service for name, service in services.items() if service["command"][1] == "serve"}
    assert sum(service.get("deploy", {}).get("replicas", 1) for service in serving.values()) >= 2
    for name, service in serving.items():
        command = service["command"]
        assert "--no-scheduler" in command, f"{name} would run a second scheduler"
        assert command[command.index("--host") + 1] == "0.0.0.0", f"{name} must listen beyond its container's loopback"  # noqa: S104
        assert "/healthz" in " ".join(service["healthcheck"]["test"]), name
    schedulers = {name: service for name, service in services.items() if service["command"][1:] == ["scheduler"]}
    assert list(schedulers) == ["scheduler"]
    assert schedulers["scheduler"]["deploy"]["replicas"] == 1
    assert schedulers["scheduler"]["healthcheck"]["test"][0] == "CMD"
    metrics_port = schedulers["scheduler"]["environment"]["GOLDENSET_SCHEDULER_METRICS_PORT"]
    assert f":{metrics_port}/healthz" in " ".join(schedulers["scheduler"]["healthcheck"]["test"]), "the worker's health is on its metrics port"


def test_compose_proxies_to_the_api_replicas_and_keeps_postgres_data() -> None:
    compose = _compose()
    proxy = compose["services"]["proxy"]
    assert proxy["depends_on"]["api"]["condition"] == "service_healthy"
    assert "/healthz" in " ".join(proxy["healthcheck"]["test"])
    mounts = [volume.split(":") for volume in proxy["volumes"]]
    config = next(DEPLOY / source for source, target, *_ in mounts if target.startswith("/etc/nginx/"))
    text = config.read_text(encoding="utf-8")
    upstream = re.search(r"upstream (\w+) \{(.*?)\}", text, re.DOTALL)
    assert upstream and f"proxy_pass http://{upstream[1]};" in text
    assert re.search(r"server api:8000 resolve\b", upstream[2]), "every `api` replica, found by name as replicas come and go"
    published = proxy["ports"][0].rsplit(":", 1)[1]
    assert re.search(rf"listen {published};", text)
    postgres = compose["services"]["postgres"]
    assert postgres["volumes"] == ["pgdata:/var/lib/postgresql/data"] and "pgdata" in compose["volumes"]
    assert postgres["healthcheck"]["test"][1] == "pg_isready"


# --- Kubernetes ------------------------------------------------------------------------------------


def test_kustomization_lists_every_manifest_and_they_name_no_namespace() -> None:
    kustomization = _load_yaml(K8S / "kustomization.yaml")
    assert sorted(kustomization["resources"]) == [path.name for path in _manifest_files()]
    assert "namespace" not in kustomization
    assert [doc["metadata"]["name"] for doc in _manifests() if "namespace" in doc["metadata"]] == []
    kinds = {doc["kind"] for doc in _manifests()}
    assert {"Deployment", "Job", "Secret", "ConfigMap", "Service", "Ingress", "PodDisruptionBudget", "CronJob"} <= kinds


def test_api_deployment_has_replicas_probes_and_limits() -> None:
    api = _only("Deployment", "api")
    assert api["spec"]["replicas"] >= 2
    (container,) = _pod_spec(api)["containers"]
    assert _command(container)[:3] == ["goldenset", "serve", "--no-scheduler"]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert _command(container)[_command(container).index("--port") + 1] == str(ports["http"])
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/healthz", probe
        assert container[probe]["httpGet"]["port"] in ("http", ports["http"]), probe
    for bound in ("requests", "limits"):
        assert set(container["resources"][bound]) >= {"cpu", "memory"}, bound
    labels = api["spec"]["template"]["metadata"]["labels"]
    assert api["spec"]["selector"]["matchLabels"].items() <= labels.items()
    budget = _only("PodDisruptionBudget")
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert 0 < budget["spec"]["minAvailable"] < api["spec"]["replicas"]
    service = _only("Service")
    assert service["spec"]["selector"].items() <= labels.items()
    assert {port["targetPort"] for port in service["spec"]["ports"]} <= {"http", ports["http"]}
    backends = [path["backend"]["service"] for rule in _only("Ingress")["spec"]["rules"] for path in rule["http"]["paths"]]
    assert backends and all(backend["name"] == service["metadata"]["name"] for backend in backends)
    assert {backend["port"]["name"] for backend in backends} <= {port["name"] for port in service["spec"]["ports"]}


def test_exactly_one_scheduler_replaced_by_recreate() -> None:
    scheduler = _only("Deployment", "scheduler")
    assert scheduler["spec"]["replicas"] == 1
    assert scheduler["spec"]["strategy"] == {"type": "Recreate"}
    (container,) = _pod_spec(scheduler)["containers"]
    assert _command(container) == ["goldenset", "scheduler"]
    metrics_port = {variable["name"]: variable["value"] for variable in container["env"]}["GOLDENSET_SCHEDULER_METRICS_PORT"]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert str(ports["metrics"]) == metrics_port
    for probe in ("startupProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/healthz" and container[probe]["httpGet"]["port"] in ("metrics", ports["metrics"]), probe
    commands = [_command(container) for workload in _workloads() for container in _pod_spec(workload)["containers"]]
    assert [command for command in commands if command[1:2] == ["scheduler"]] == [["goldenset", "scheduler"]]
    assert all("--no-scheduler" in command for command in commands if command[1:2] == ["serve"]), "a serve without --no-scheduler is a second scheduler"


def test_migration_job_and_the_optional_refresh_cronjob() -> None:
    (migrate,) = _pod_spec(_only("Job"))["containers"]
    assert _command(migrate) == ["goldenset", "migrate"]
    cronjob = _only("CronJob")
    (refresh,) = _pod_spec(cronjob)["containers"]
    assert _command(refresh)[:3] == ["goldenset", "refresh", "--eval"] and len(_command(refresh)) == 4
    assert cronjob["spec"]["suspend"] is True, "optional: it runs once someone names the eval"
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"


def test_every_pod_runs_one_image_as_non_root_with_limits() -> None:
    config_names = {doc["metadata"]["name"] for doc in _manifests() if doc["kind"] in ("ConfigMap", "Secret")}
    images = set()
    for workload in _workloads():
        name = f"{workload['kind']}/{workload['metadata']['name']}"
        pod = _pod_spec(workload)
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod.get("automountServiceAccountToken") is False, name
        scratch = {volume["name"] for volume in pod.get("volumes", []) if "emptyDir" in volume}
        for container in pod["containers"]:
            images.add(container["image"])
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False, name
            assert security["capabilities"]["drop"] == ["ALL"], name
            mounts = {mount["mountPath"]: mount["name"] for mount in container.get("volumeMounts", [])}
            assert mounts.get("/tmp") in scratch and mounts.get("/data") in scratch, f"{name}: /tmp and the home /data need writable emptyDirs"
            for bound in ("requests", "limits"):
                assert set(container["resources"][bound]) >= {"cpu", "memory"}, f"{name}: {bound}"
            references = {source.get("configMapRef", source.get("secretRef", {})).get("name") for source in container["envFrom"]}
            assert references == {"goldenset-config", "goldenset-secrets"} and references <= config_names, name
    assert images == {"goldenset"}
    kustomization = _load_yaml(K8S / "kustomization.yaml")
    assert [image["name"] for image in kustomization["images"]] == ["goldenset"]


def _kubernetes_env() -> dict[str, str]:
    return {**_only("ConfigMap")["data"], **_only("Secret")["stringData"]}


def test_secret_template_is_refused_until_edited_and_then_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    env = _kubernetes_env()
    assert set(_only("Secret")["stringData"]) >= {"GOLDENSET_SECRET_KEY", "GOLDENSET_DATABASE_URL", "GOLDENSET_ADMIN_TOKEN"}
    assert "GOLDENSET_SECRET_KEY" not in _only("ConfigMap")["data"], "secrets belong in the Secret"
    assert all("REPLACE-ME" in value for value in _only("Secret")["stringData"].values()), "placeholders are marked"
    with pytest.raises(ValidationError, match="GOLDENSET_SECRET_KEY must be set"):
        _settings_from({**_dockerfile_env(), **env}, monkeypatch)
    edited = {name: value.replace("REPLACE-ME", secrets.token_urlsafe(36)) for name, value in env.items()}
    settings = _settings_from({**_dockerfile_env(), **edited}, monkeypatch)
    assert settings.env == "production" and settings.database_url.startswith("postgresql")
    assert settings.ui_session_hours == int(env["GOLDENSET_UI_SESSION_HOURS"])


# --- the image ---------------------------------------------------------------------------------------


def test_image_targets_install_their_locks_and_run_as_non_root_on_a_writable_data_dir() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    stages = dict(re.findall(r"^FROM \S+ AS (\S+)\n(.*?)(?=^FROM |\Z)", dockerfile, re.MULTILINE | re.DOTALL))
    assert list(stages) == ["base", "api", "full"], "full last: a plain `docker build` builds every role's image"
    # Each target installs exactly its lock, by hash, nothing resolved; PyTorch's CPU build comes from TORCH_INDEX_URL.
    assert "requirements/api.lock" in stages["api"] and "TORCH_INDEX_URL" not in stages["api"]
    assert "requirements/full.lock" in stages["full"] and re.search(r'^ARG TORCH_INDEX_URL="https://\S+"$', stages["full"], re.MULTILINE)
    for name in ("api", "full"):
        stage = stages[name]
        assert re.search(r"pip install --no-cache-dir --require-hashes --no-deps .*-r requirements/\w+\.lock", stage), name
        assert "pip install --no-cache-dir --no-deps ./clients/python ." in stage and "pip check" in stage, name
        user = re.findall(r"^USER (\S+)$", stage, re.MULTILINE)
        assert len(user) == 1 and user[0].split(":")[0].isdigit() and user[0].split(":")[0] != "0", f"{name}: a numeric non-root uid (runAsNonRoot can check it)"
        assert re.findall(r"^WORKDIR (\S+)$", stage, re.MULTILINE)[-1] == "/data", name
        assert "/healthz" in stage.split("HEALTHCHECK", 1)[1].splitlines()[1], name
    assert re.findall(r"^CMD (.*)$", stages["api"], re.MULTILINE) == ['["goldenset", "serve", "--no-scheduler", "--host", "0.0.0.0", "--port", "8000"]']
    uid = re.findall(r"^USER (\S+)$", stages["full"], re.MULTILINE)[0].split(":")[0]
    assert re.search(rf"install --directory --owner {uid} .* /data$", stages["base"], re.MULTILINE)
    env = _dockerfile_env()
    assert env["GOLDENSET_DATABASE_URL"] == "sqlite:////data/goldenset.db" and env["HOME"] == "/data"
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").splitlines()
    copied = re.findall(r"^COPY (\S+) ", dockerfile, re.MULTILINE)
    assert {f"!{path}" for path in copied} <= set(ignored), "everything the image copies is in the build context"
