#!/usr/bin/env python3
"""The test lab: real Docker engines and real sshd hosts on loopback, started and stopped by pid.

    python3 scripts/testlab.py up       # idempotent: installs what is missing, starts what is down
    python3 scripts/testlab.py status
    python3 scripts/testlab.py down     # stops only what `up` started, by the pids it recorded

Hosts: `local` (this machine, engine `ctl`) and two SSH targets, `h2` on 127.0.0.2 and `h3` on
127.0.0.3 (port 2222), each with its own dockerd, data root and work directory, so that what one
host has (an image, a container) the other does not. `h3` is marked offline: images are shipped
to it from the controller. The inventory for tests is written to .lab/hosts.yaml. Debian's
python3 and python3-venv are installed too: tests run benchmarks natively (no Docker) on a copy
of h2 with `docker: {engine: false}`.

Standard library only: it runs before the project's virtualenv exists.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAB = Path(os.environ.get("SUBRUN_LAB_DIR", ROOT / ".lab"))
SSH_PORT = 2222
SSH_HOSTS = {"h2": "127.0.0.2", "h3": "127.0.0.3"}
# h2's runs get cores of their own, as on a shared machine; h3 stays unpinned
PINNED = {"h2": ", cpuset: auto"}
ENGINES = ("ctl", *SSH_HOSTS)
BASE_IMAGE = "subrun/debian:bookworm"
APT_NEEDS = {"dockerd": "docker.io", "sshd": "openssh-server", "debootstrap": "debootstrap",
             "ip": "iproute2"}
ROOTFS_PACKAGES = "python3,python3-venv,ca-certificates,procps"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["up", "down", "status", "env"])
    parser.add_argument("--engine-only", action="store_true",
                        help="start only the controller's Docker engine (for the demo)")
    args = parser.parse_args()
    if args.action == "up":
        up(engine_only=args.engine_only)
        status()
    elif args.action == "down":
        down()
    elif args.action == "status":
        return 0 if status() else 1
    else:
        print(f"export DOCKER_HOST=unix://{engine_dir('ctl')}/docker.sock")
    return 0


# --- up ---------------------------------------------------------------------------------

def up(*, engine_only: bool) -> None:
    require_root()
    install_missing()
    for sub in ("pids", "cache", "ssh", "hosts"):
        (LAB / sub).mkdir(parents=True, exist_ok=True)
    for name in ENGINES[:1] if engine_only else ENGINES:
        start_engine(name)
    rootfs_tar = build_rootfs()
    for name in ENGINES[:1] if engine_only else ENGINES:
        import_base(name, rootfs_tar)
    if not engine_only:
        keys = make_keys()
        for name, address in SSH_HOSTS.items():
            start_sshd(name, address, keys)
        write_known_hosts()
        write_inventory()


def require_root() -> None:
    if os.geteuid() != 0:
        sys.exit("testlab: run as root (it installs packages and starts dockerd and sshd).")


def install_missing() -> None:
    missing = sorted({pkg for tool, pkg in APT_NEEDS.items() if not which(tool)}
                     | set(missing_python_venv()))
    if not missing:
        return
    print(f"testlab: installing {' '.join(missing)}", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, env=env,
                   stdout=subprocess.DEVNULL)


def missing_python_venv() -> list[str]:
    """Debian's python3 with venv support: native runs on Docker-less hosts make venvs with it."""
    python = Path("/usr/bin/python3")
    if not python.exists():
        return ["python3", "python3-venv"]
    found = subprocess.run([str(python), "-c", "import ensurepip, venv"], capture_output=True,
                           check=False)
    return [] if found.returncode == 0 else ["python3-venv"]


def which(tool: str) -> str | None:
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")


def engine_dir(name: str) -> Path:
    return LAB / "docker" / name


def start_engine(name: str) -> None:
    d = engine_dir(name)
    sock = d / "docker.sock"
    if alive(name + "-dockerd") and engine_answers(sock):
        return
    d.mkdir(parents=True, exist_ok=True)
    argv = [which("dockerd") or "dockerd", "--data-root", str(d / "data"),
            "--exec-root", f"/run/subrun-lab/{name}", "--host", f"unix://{sock}",
            "--pidfile", str(d / "dockerd.pid"), "--iptables=false", "--ip-masq=false"]
    if name != "ctl":
        argv += ["--bridge=none"]  # one bridge per machine: only the controller engine has it
    spawn(name + "-dockerd", argv, d / "dockerd.log")
    wait_for(lambda: engine_answers(sock), 60, f"dockerd '{name}' ({d / 'dockerd.log'})")


def engine_answers(sock: Path) -> bool:
    r = subprocess.run(["docker", "-H", f"unix://{sock}", "version", "--format",
                        "{{.Server.Version}}"], capture_output=True, text=True, check=False)
    return r.returncode == 0


def build_rootfs() -> Path:
    """Debian bookworm with Python, made once by debootstrap and cached as a tarball."""
    tar = LAB / "cache" / "bookworm-python.tar"
    if tar.exists():
        return tar
    rootfs = LAB / "cache" / "rootfs"
    shutil.rmtree(rootfs, ignore_errors=True)
    print("testlab: debootstrap bookworm (about a minute, cached afterwards)", flush=True)
    mirror = debian_mirror()
    subprocess.run(["debootstrap", "--variant=minbase", f"--include={ROOTFS_PACKAGES}",
                    "bookworm", str(rootfs), mirror], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["chroot", str(rootfs), "apt-get", "clean"], check=True)
    partial = tar.with_suffix(".partial")
    subprocess.run(["tar", "-C", str(rootfs), "-cf", str(partial), "."], check=True)
    partial.rename(tar)
    shutil.rmtree(rootfs, ignore_errors=True)
    return tar


def debian_mirror() -> str:
    listed = sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))
    listed += sorted(Path("/etc/apt/sources.list.d").glob("*.list"))
    for source in [Path("/etc/apt/sources.list"), *listed]:
        if not source.is_file():
            continue
        for line in source.read_text().splitlines():
            words = line.split()
            if words[:1] == ["URIs:"] and "debian" in words[1] and "security" not in words[1]:
                return words[1]
            if words[:1] == ["deb"] and "debian" in line and "security" not in line:
                return next(w for w in words[1:] if "://" in w)
    return "http://deb.debian.org/debian"


def import_base(name: str, tar: Path) -> None:
    docker = ["docker", "-H", f"unix://{engine_dir(name)}/docker.sock"]
    have = subprocess.run([*docker, "image", "inspect", BASE_IMAGE], capture_output=True,
                          check=False)
    if have.returncode == 0:
        return
    with tar.open("rb") as f:
        subprocess.run([*docker, "import", "-", BASE_IMAGE], stdin=f, check=True,
                       stdout=subprocess.DEVNULL)


def make_keys() -> dict[str, Path]:
    ssh = LAB / "ssh"
    keys = {"client": ssh / "id_ed25519"}
    for name in SSH_HOSTS:
        keys[name] = ssh / name / "ssh_host_ed25519_key"
    for key in keys.values():
        if not key.exists():
            key.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "subrun-lab",
                            "-f", str(key)], check=True)
    return keys


def start_sshd(name: str, address: str, keys: dict[str, Path]) -> None:
    d = LAB / "ssh" / name
    work = LAB / "hosts" / name
    work.mkdir(parents=True, exist_ok=True)
    # a home of the host's own: sshd runs each command through the user's shell, which reads
    # ~/.bashrc first, and a developer's (pyenv init, rehash) would run before every command
    # of every channel, hundreds of processes a second in a busy suite
    home = d / "home"
    home.mkdir(exist_ok=True)
    (d / "authorized_keys").write_text(keys["client"].with_suffix(".pub").read_text())
    config = d / "sshd_config"
    config.write_text("\n".join([
        f"ListenAddress {address}:{SSH_PORT}",
        f"HostKey {keys[name]}",
        f"PidFile {d / 'sshd.pid'}",
        f"AuthorizedKeysFile {d / 'authorized_keys'}",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "ClientAliveInterval 15",
        f"SetEnv DOCKER_HOST=unix://{engine_dir(name)}/docker.sock SUBRUN_LAB_HOST={name}"
        f" HOME={home}",
        "Subsystem sftp internal-sftp",
        "",
    ]))
    if alive(name + "-sshd"):
        return
    Path("/run/sshd").mkdir(exist_ok=True)
    spawn(name + "-sshd", [which("sshd") or "/usr/sbin/sshd", "-D", "-e", "-f", str(config)],
          d / "sshd.log")
    wait_for(lambda: port_open(address, SSH_PORT), 20, f"sshd '{name}' ({d / 'sshd.log'})")


def port_open(address: str, port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((address, port)) == 0


def write_known_hosts() -> None:
    lines = []
    for name, address in SSH_HOSTS.items():
        pub = (LAB / "ssh" / name / "ssh_host_ed25519_key.pub").read_text().split()
        lines.append(f"[{address}]:{SSH_PORT} {pub[0]} {pub[1]}")
    (LAB / "ssh" / "known_hosts").write_text("\n".join(lines) + "\n")


def write_inventory() -> None:
    """The tests' inventory: the controller plus the two SSH targets."""
    ctl_sock = engine_dir("ctl") / "docker.sock"
    entries = [
        "system_defaults:",
        "  submitter: SubrunLab",
        "  division: open",
        "  status: available",
        "  cooling: air",
        "  host_memory_configuration: 'not reported (test lab, no DMI access)'",
        "hosts:",
        "  - name: local",
        "    transport: local",
        f"    work_dir: {LAB / 'hosts' / 'local'}",
        "    labels: [edge]",
        "    settle_s: 0.5",
        "    system: {system_name: 'subrun test lab controller'}",
        f"    docker: {{docker_host: 'unix://{ctl_sock}', base_image: '{BASE_IMAGE}'}}",
        "    power: {analyzer: sim-wt310e}",
    ]
    for name, address in SSH_HOSTS.items():
        entries += [
            f"  - name: {name}",
            f"    address: {address}",
            f"    port: {SSH_PORT}",
            "    user: root",
            f"    key: {LAB / 'ssh' / 'id_ed25519'}",
            f"    known_hosts: {LAB / 'ssh' / 'known_hosts'}",
            f"    work_dir: {LAB / 'hosts' / name}",
            "    labels: [edge]",
            "    settle_s: 0.5",
            f"    system: {{system_name: 'subrun test lab host {name}'}}",
            f"    docker: {{provision: {'ship' if name == 'h3' else 'build'}, "
            f"base_image: '{BASE_IMAGE}'{PINNED.get(name, '')}}}",
            "    power: {analyzer: sim-wt310e}",
        ]
    entries += [
        "analyzers:",
        "  - {name: sim-wt310e, model: WT310E, resource: sim, host: local, port: 8898}",
    ]
    (LAB / "hosts.yaml").write_text("\n".join(entries) + "\n")


# --- process bookkeeping ----------------------------------------------------------------

def pid_file(name: str) -> Path:
    return LAB / "pids" / f"{name}.pid"


def spawn(name: str, argv: list[str], log: Path) -> None:
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    pid_file(name).write_text(f"{proc.pid}\n")


def recorded_pid(name: str) -> int | None:
    try:
        return int(pid_file(name).read_text())
    except (OSError, ValueError):
        return None


def alive(name: str) -> bool:
    pid = recorded_pid(name)
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def wait_for(check, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    sys.exit(f"testlab: {what} did not come up within {timeout_s:.0f} s; see its log.")


# --- down and status --------------------------------------------------------------------

def down() -> None:
    stop_detached()
    stop_leases()
    for pid_path in sorted((LAB / "pids").glob("*.pid")):
        name = pid_path.stem
        pid = recorded_pid(name)
        if pid is not None and alive(name):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 20
            while alive(name) and time.monotonic() < deadline:
                time.sleep(0.2)
            if alive(name):
                os.kill(pid, signal.SIGKILL)
            print(f"testlab: stopped {name} (pid {pid})")
        pid_path.unlink(missing_ok=True)


def work_dirs() -> list[Path]:
    """The work_dir of the lab's hosts (and of each test worker's lane of them, a folder
    `gw<N>` inside) and of the embedded default's host (`make demo`)."""
    roots = [LAB / "hosts" / h for h in ("local", *SSH_HOSTS)]
    roots += [lane for root in roots for lane in sorted(root.glob("gw*")) if lane.is_dir()]
    default = ROOT / "hosts.yaml"
    if default.exists():
        roots += [Path(line.split(":", 1)[1].strip().strip("'\""))
                  for line in default.read_text().splitlines()
                  if line.strip().startswith("work_dir:")]
    return roots


def detached_folders() -> list[Path]:
    """The folders of the detached processes (runs, power daemons) started on the lab's hosts,
    each holding `pid` and `start`."""
    return [f for root in work_dirs() for f in sorted((root / "detached").glob("*"))
            if f.is_dir()]


def stop_leases() -> None:
    """Let go of the host leases (lab.lease) held on the lab: a holder whose controller died
    would lapse by itself within its bound; the lab going down ends it now. Only a process
    whose command line names the lease's folder is signalled."""
    for pid_path in (p for root in work_dirs() for p in root.glob("leases/*/pid")):
        try:
            pid = int(pid_path.read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if str(pid_path.parent).encode() in cmdline:
            os.kill(pid, signal.SIGTERM)
            print(f"testlab: let go of lease {pid_path.parent} (pid {pid})")


def started_at(pid: int) -> str | None:
    """The kernel's start time of a process (field 22 of /proc/PID/stat), None once it is gone:
    with the recorded one it tells our process from a later one that got the same pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def stop_detached() -> None:
    """Stop what campaigns left running on the lab: a power daemon outlives its campaign by
    design (the next one reuses it), so the lab going down is when it stops. TERM reaches the
    process through its supervisor; KILL to its group after 10 s."""
    for folder in detached_folders():
        try:
            pid = int((folder / "pid").read_text())
            start = (folder / "start").read_text().strip()
        except (OSError, ValueError):
            continue
        if (folder / "exit").exists() or started_at(pid) != start:
            continue  # ended, or the pid now belongs to another process
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while started_at(pid) == start and time.monotonic() < deadline:
            time.sleep(0.2)
        if started_at(pid) == start:
            os.killpg(pid, signal.SIGKILL)
        print(f"testlab: stopped {folder.name} (pid {pid})")


def status() -> bool:
    names = [f"{e}-dockerd" for e in ENGINES] + [f"{h}-sshd" for h in SSH_HOSTS]
    ok = True
    for name in names:
        if pid_file(name).exists() or name.startswith("ctl"):
            running = alive(name)
            ok &= running
            print(f"  {name:12} {'up' if running else 'DOWN'}  pid {recorded_pid(name)}")
    return ok


if __name__ == "__main__":
    sys.exit(main())
