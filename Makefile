# The two commands a newcomer needs: `make demo` and `make test`.
# Each creates its own virtual environment (.venv) and installs what it needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
BASE   := $(VENV)/.installed-base
STAMP  := $(VENV)/.installed

# Every process the tests start (hundreds of nsqds) imports the project from source: with
# PYTHONDONTWRITEBYTECODE set (some machines set it) each one compiled every module again,
# 0.25 s of CPU per nsqd start. Bytecode goes to __pycache__/, which git ignores.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-newest acceptance soak install clean cluster cluster-down cluster-packages cluster-demo test-cluster

# The demo needs only the package; the tests add their tools, the PyPI clients and Spark.
$(BASE): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $(BASE)

# checkov scans the pods the project ships (tests/chart/test_pod_security.py); it lives in
# an environment of its own, as its pinned dependencies would move the project's, made once
# with the machine's python3 whichever Python the tests run on.
CHECKOV := .venv-checkov/bin/checkov
$(CHECKOV):
	python3 -m venv .venv-checkov
	.venv-checkov/bin/pip install -q 'checkov==3.3.30'

# Spark runs on a JVM: Java 17 from Debian's packages where none is installed (needs root).
# nsqadmin's page tests drive Debian's headless Chromium; without root they skip, saying why.
# The /metrics tests run Prometheus' own linter, promtool, taken out of Debian's prometheus
# package into the venv (installing the package would also start a Prometheus server);
# without it they skip, saying why. The replicated topics' fault tests run nsqd under
# strace (a slow fsync) and libfaketime (clock jumps), and cut links between nsqds in
# network namespaces with iptables: all three from Debian's packages.
$(STAMP): $(BASE) $(CHECKOV)
	@command -v java >/dev/null || { \
	  echo "installing Java 17 for the Spark tests"; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless; }
	@{ command -v chromium >/dev/null && command -v chromedriver >/dev/null; } || { \
	  echo "installing Chromium for the nsqadmin page tests"; \
	  { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium chromium-driver; } || \
	  echo "could not install chromium and chromium-driver: the nsqadmin page tests will skip"; }
	@command -v promtool >/dev/null || [ -x $(VENV)/bin/promtool ] || { \
	  echo "fetching promtool from Debian's prometheus package for the /metrics tests"; \
	  rm -rf $(VENV)/.prometheus-deb && mkdir $(VENV)/.prometheus-deb && cd $(VENV)/.prometheus-deb && \
	  { apt-get download -qq prometheus 2>/dev/null || { apt-get update -qq && apt-get download -qq prometheus; }; } && \
	  dpkg-deb -x prometheus_*.deb . && cp usr/bin/promtool ../bin/promtool && cd .. && rm -rf .prometheus-deb; } || \
	  echo "could not fetch promtool: the promtool checks of /metrics will skip"
	@dpkg -s strace libfaketime iptables >/dev/null 2>&1 || { \
	  echo "installing strace, faketime and iptables for the replication fault tests (slow fsync, clock jumps, partitions)"; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends strace faketime iptables; } || \
	  echo "could not install strace, faketime and iptables: the slow-disk, clock-jump and partition tests will skip"
	$(PY) -m pip install -q -e '.[test,spark]'
	touch $(STAMP)

install: $(STAMP)

demo: $(BASE)
	$(PY) -m nsq_local.demo

# Three workers on two cores, a test file each at a time (module fixtures stay in one
# worker): most tests wait on real processes, sockets and the operator's timers, and with
# two workers the suite used 1.3 of the 2 cores (1069 s of CPU in 816 s). The longest files
# start first (tests/run_order.py), not those with the most tests.
# The slowest tests are listed at the end: the suite must stay under 15 minutes here.
TEST_WORKERS ?= 3
test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25 $(TEST_ARGS)

# The newest Python we support, in a venv of its own (found on PATH or in pyenv by
# .ci/find-python). CI runs this after `make test`, which ran everything on the oldest.
# Here: what people install with pip and run on their own Python (nsqd, nsqlookupd,
# nsqadmin, the client, nsq-local, the operator's own code), not what runs on the image's
# pinned Python 3.11 (the operator under kopf against the emulated API server), nor what
# our Python does not change (the chart through helm and checkov, the kind scripts,
# Spark's JVM, the slow tests, Go's answers to the nsqd_ref runs): the two runs together
# keep CI in its time.
NEWEST_PYTHON_VERSION ?= 3.13
NEWEST_TEST_ARGS := -m "not spark and not slow and not nsqd_ref" \
	--ignore-glob="tests/operator/test_operator_*.py" --ignore=tests/chart --ignore=tests/e2e --ignore=e2e --ignore=tests/cluster
test-newest:
	$(MAKE) test PYTHON="$$(.ci/find-python $(NEWEST_PYTHON_VERSION))" VENV=.venv-$(NEWEST_PYTHON_VERSION) \
		TEST_ARGS='$(NEWEST_TEST_ARGS)'

# NSQ's black-box acceptance suite, against our nsqd and nsqlookupd.
acceptance: $(STAMP)
	NSQD_CMD="$(abspath $(VENV))/bin/nsqd" NSQLOOKUPD_CMD="$(abspath $(VENV))/bin/nsqlookupd" \
		$(PY) -m pytest -q -p no:cacheprovider -c ../shared/acceptance/pytest.ini \
		--rootdir ../shared/acceptance ../shared/acceptance $(ACCEPTANCE_ARGS)

# Replicated topics under faults for a bounded time (e2e/replication_soak.py): three nsqds
# in network namespaces, kill -9 with wiped disks, partitions and new peer lists given
# live under load, two copies of each message; exit 1 on any acknowledged message never
# delivered.
SOAK_MINUTES ?= 2
SOAK_SEED ?= 21
SOAK_ARGS ?= --replicas 2 --wipe --membership
soak: $(STAMP)
	$(PY) e2e/replication_soak.py --minutes $(SOAK_MINUTES) --seed $(SOAK_SEED) $(SOAK_ARGS)

# A one-node Kubernetes of upstream components, built here from Go modules and Debian's
# packages (e2e/cluster/README.md): the first run builds for a while, later ones start in
# about a minute. Its last line is the `export KUBECONFIG=...` that reaches it. Needs root.
CLUSTER := e2e/cluster
CLUSTER_PACKAGES := debootstrap buildah containernetworking-plugins iptables ipset conntrack libseccomp-dev pkg-config
cluster-packages:
	@dpkg -s $(CLUSTER_PACKAGES) >/dev/null 2>&1 || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(CLUSTER_PACKAGES) >/dev/null; }

cluster: cluster-packages
	$(CLUSTER)/build.sh
	$(CLUSTER)/images.sh
	$(CLUSTER)/up.sh

cluster-down:
	$(CLUSTER)/down.sh

# make demo's kind of proof on the running cluster: load from pods, a rolling upgrade and a
# scale-down under it, published / acknowledged / delivered / lost counted.
# One command: starts the cluster unless one runs, then the demo on it.
cluster-demo: $(STAMP)
	@bash -c 'source $(CLUSTER)/lib.sh && running kube-apiserver' || $(MAKE) cluster
	HELM="$$($(PY) -c 'from tests.chart.helm import helm_binary; print(helm_binary())')" $(CLUSTER)/demo.sh

# The tests that need the real cluster (tests/cluster), on one started for them and
# stopped after; `make test` skips them where no cluster runs.
# Two at a time: their pods share the one node's kubelet.
CLUSTER_TEST_WORKERS ?= 2
test-cluster: $(STAMP)
	$(MAKE) cluster
	NSQ_REQUIRE_CLUSTER=1 $(PY) -m pytest -q -p no:cacheprovider -n $(CLUSTER_TEST_WORKERS) --dist loadfile \
		tests/cluster --ignore=tests/cluster/test_user_upgrade.py $(CLUSTER_TEST_ARGS); status=$$?; \
	NSQ_REQUIRE_CLUSTER=1 $(PY) -m pytest -q -p no:cacheprovider -s tests/cluster/test_user_upgrade.py \
		$(CLUSTER_TEST_ARGS) || status=1; \
	$(CLUSTER)/down.sh; exit $$status

clean:
	rm -rf $(VENV) .venv-$(NEWEST_PYTHON_VERSION) .venv-checkov build *.egg-info
