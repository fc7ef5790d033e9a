"""A person approves re-building targets before the snapshot that re-builds them (Airflow's human-in-the-loop).

A table that already has a snapshot is snapshotted again when a window left it waiting for a rebuild
(a change its target could not follow exactly, with ``schema_change_policy`` ``rebuild``) or when a run
names it in ``resnapshot``; the apply then replaces its Iceberg target with the fresh snapshot in one
commit. :class:`MySqlCdcRebuildApprovalOperator`, placed in front of the snapshot plan
(``mysql_cdc_pipeline(approve_rebuilds=True)``), asks first, in the Airflow UI's "Required actions":

* nothing to re-build: it succeeds at once, without asking;
* otherwise it lists the tables and why, with the list as a form field (remove a table to hold it), and
  waits (``response_timeout``, default 1 hour; then the default answer, Reject, is taken);
* Approve: the plan snapshots the tables left in the list; Reject: none of them. A table not approved keeps
  its target as it is. One waiting for a rebuild stays stopped: capture stages none of its changes, the
  apply applies the other tables and stops it with ``RebuildPendingError`` (the run fails, naming it), and
  the next run asks again. One named only in ``resnapshot`` goes on being applied from the binlog. First
  snapshots of new tables never wait for approval.

Its XCom ``approved_rebuilds`` is what the plan's ``approved_rebuilds`` reads; its return value records the
question and the answer (who, which tables).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import HITLOperator
from airflow.sdk import Context, Param

from airflow_provider_mysql_cdc.core.windows import TableSelection, patterns
from airflow_provider_mysql_cdc.hooks.metadata import metadata_store
from airflow_provider_mysql_cdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysql_cdc.task_failure import terminal_errors_fail_task

#: XCom key of the tables approved for a fresh snapshot (the snapshot plan's ``approved_rebuilds``).
APPROVED_XCOM_KEY = "approved_rebuilds"
#: XCom key of the question asked (``db.table`` -> why), read back when the answer arrives.
ASKED_XCOM_KEY = "rebuilds_asked"
#: The form field holding the tables to re-build (pre-filled with every table asked about).
TABLES_FIELD = "rebuild_tables"
#: How long the question waits for an answer before the default (Reject) is taken.
DEFAULT_APPROVAL_TIMEOUT = timedelta(hours=1)

APPROVE = "Approve"
REJECT = "Reject"


def approval_body(pipeline: str, asked: Mapping[str, str]) -> str:
    """The question's Markdown text: each table and why it would be re-built."""
    lines = [
        f"Pipeline **{pipeline}** would snapshot these tables again and replace their Iceberg tables with the "
        "fresh snapshot (one commit per table):",
        "",
        *(f"- `{name}`: {why}" for name, why in sorted(asked.items())),
        "",
        f"**{APPROVE}** re-builds the tables left in `{TABLES_FIELD}` (remove one to hold it). **{REJECT}** "
        "re-builds none. A table held keeps its target as it is. One waiting for a rebuild stays stopped "
        "(its changes are not replicated, the apply fails it by name) and the next run asks again; one "
        "named only in `resnapshot` goes on being applied from the binlog.",
    ]
    return "\n".join(lines)


def approved_tables(asked: Mapping[str, str], chosen: str, tables_field: Any) -> list[str]:
    """The tables an answer approves: none on Reject; on Approve those of the question still in the form's
    list (every one asked about when the answer carries no list, as the REST API allows)."""
    if chosen != APPROVE:
        return []
    if tables_field is None:
        return sorted(asked)
    kept = set(patterns(tables_field))
    return sorted(name for name in asked if name in kept)


class MySqlCdcRebuildApprovalOperator(HITLOperator):
    """Ask a person before a run snapshots tables again (re-building their targets); see the module text.

    :param pipeline: pipeline name.
    :param tables: ``database.table`` glob patterns the pipeline captures (the plan's).
    :param exclude_tables: patterns to exclude (the plan's).
    :param resnapshot: names or patterns the run snapshots again (the plan's).
    :param schema_change_policy: the plan's: under ``rebuild`` tables waiting for a rebuild are asked about.
    :param response_timeout: how long to wait for an answer before Reject is taken (None: wait forever;
        later runs' capture and apply then wait on this run).
    :param mysql_cdc_conn_id: the MySQL source connection.
    :param metadata_conn_id: connection of the metadata database; default: a SQLite file in AIRFLOW_HOME.
    """

    template_fields: Sequence[str] = (
        *HITLOperator.template_fields,
        "pipeline",
        "tables",
        "exclude_tables",
        "resnapshot",
        "schema_change_policy",
        "mysql_cdc_conn_id",
        "metadata_conn_id",
    )
    ui_color = "#fde2c6"

    def __init__(
        self,
        *,
        pipeline: str,
        tables: Sequence[str] | str = ("*.*",),
        exclude_tables: Sequence[str] | str = (),
        resnapshot: Sequence[str] | str = (),
        schema_change_policy: str = "rebuild",
        response_timeout: timedelta | None = DEFAULT_APPROVAL_TIMEOUT,
        mysql_cdc_conn_id: str = MySqlCdcHook.default_conn_name,
        metadata_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.pop("params", None)  # the DAG's params, which Airflow hands every operator; the form has its own
        super().__init__(
            subject="Re-build tables from a fresh snapshot?",
            options=[APPROVE, REJECT],
            defaults=REJECT,
            multiple=False,
            params={
                TABLES_FIELD: Param(
                    [], type="array", description="tables to snapshot again; remove one to keep its target as is"
                )
            },
            response_timeout=response_timeout,
            **kwargs,
        )
        self.pipeline = pipeline
        self.tables = tables
        self.exclude_tables = exclude_tables
        self.resnapshot = resnapshot
        self.schema_change_policy = schema_change_policy
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.metadata_conn_id = metadata_conn_id

    @terminal_errors_fail_task
    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_mysql_cdc.snapshot.engine import SnapshotRequest, snapshots_to_approve

        pipeline = str(self.pipeline)
        request = SnapshotRequest(
            pipeline=pipeline,
            run_id=str(context["run_id"]),
            staging_uri="",  # not read: the question stages nothing
            tables=TableSelection.of(self.tables, self.exclude_tables),
            resnapshot=patterns(self.resnapshot),
            schema_change_policy=str(self.schema_change_policy),
        )
        source = MySqlCdcHook(mysql_cdc_conn_id=self.mysql_cdc_conn_id).get_connection_config()
        asked = snapshots_to_approve(request, source, metadata_store(self.metadata_conn_id))
        if not asked:
            self.log.info("pipeline %s: this run snapshots no table again; nothing to approve", pipeline)
            return self._answer(context, asked, decision=None, approved=[], responded_by=None)
        self.log.info(
            "pipeline %s: asking for approval to snapshot again: %s",
            pipeline,
            "; ".join(f"{name} ({why})" for name, why in sorted(asked.items())),
        )
        context["ti"].xcom_push(ASKED_XCOM_KEY, asked)
        self.subject = f"Pipeline {pipeline}: re-build {len(asked)} table(s) from a fresh snapshot?"
        self.body = approval_body(pipeline, asked)
        self.params[TABLES_FIELD] = sorted(asked)
        super().execute(context)  # waits for the answer; resumes in execute_complete
        raise AssertionError("unreachable: the human-in-the-loop operator waits for an answer")

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """The answer arrived (or the timeout took the default, Reject)."""
        answer = super().execute_complete(context, event)
        asked: dict[str, str] = context["ti"].xcom_pull(task_ids=self.task_id, key=ASKED_XCOM_KEY) or {}
        chosen = answer["chosen_options"][0]
        approved = approved_tables(asked, chosen, answer["params_input"].get(TABLES_FIELD))
        user = answer.get("responded_by_user") or {}
        responded_by = user.get("name") if isinstance(user, Mapping) else None
        held = sorted(set(asked) - set(approved))
        self.log.info(
            "pipeline %s: %s by %s; snapshotted again: %s; held: %s",
            self.pipeline,
            chosen,
            responded_by or "the timeout default",
            ", ".join(approved) or "none",
            ", ".join(held) or "none",
        )
        return self._answer(context, asked, decision=chosen, approved=approved, responded_by=responded_by)

    @staticmethod
    def _answer(
        context: Context, asked: Mapping[str, str], *, decision: str | None, approved: list[str], responded_by: Any
    ) -> dict[str, Any]:
        context["ti"].xcom_push(APPROVED_XCOM_KEY, approved)
        return {
            "asked": dict(asked),
            "decision": decision,
            "approved": approved,
            "held": sorted(set(asked) - set(approved)),
            "responded_by": responded_by,
        }
