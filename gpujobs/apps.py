from django.apps import AppConfig


class GpujobsConfig(AppConfig):
    name = "gpujobs"
    verbose_name = "GPU jobs"

    def ready(self) -> None:
        # The tasks are registered in every process, so ``enqueue`` sends them by name.
        import gpujobs.tasks  # noqa: F401
        from gpujobs import fair_share_reads, grant_history, member_holds, selectors
        from reconcile import desired_state
        from tenants import impact, review_history
        from workloads import holdings, member_limits

        # A team's unfinished jobs count against its quota (first: the quota messages name them
        # whatever they hold).
        holdings.register("its unfinished jobs", selectors.gpus_held_by_jobs)
        member_limits.register("jobs", selectors.member_jobs_use)
        member_limits.register_releaser(member_holds.release_after_commit)
        # A grant change's impact preview lists the team's jobs.
        impact.register("job", selectors.jobs_for_impact)
        # Beside each request to review: what the team did with its past grants.
        review_history.register(grant_history.grant_histories)
        # Usage-decayed fair sharing: the opportunistic jobs' decayed use lowers the weight each
        # team's opportunistic queue borrows with.
        desired_state.register_usage_reader(fair_share_reads.decayed_use_by_team)
