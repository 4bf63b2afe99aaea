"""Submission: tree layout, assembly, truncation, prechecks, the official checker, reports.

What a campaign calls, in order (each one call, so a flow task wraps it with no logic):

    runs = sources.stored_runs(RunStore(campaign.paths.store))        # every attempt
    request = sources.tree_request(campaign, rules, submitter)
    index = assemble.assemble(request, runs, systems, benchmarks)      # -> <tree>.index.json
    checked = precheck.precheck(request.root, rules, index)            # < 1 s for 100 results
    outcome = checker.run_checker(request.root, repo, rules.checker_version, work_dir=...)
    archive = tarball.pack(request.root, request.root.with_suffix(".tar.gz"))
    files = report.write_report(report.ReportInput(...), out_dir)     # files.markdown: artifact

`systems` maps each host to `sources.system_input(host, description.system)` (collectors), and
`benchmarks` each benchmark name to `sources.benchmark_input(load_manifest(name))`.
"""
