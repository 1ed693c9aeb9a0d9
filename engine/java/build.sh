#!/usr/bin/env bash
# Builds the engine's Java classes into the package's jars:
#   engine/java/build.sh [PYTHON]
# - lakehouse-delta-logstore.jar: Delta's log store for local tables (lakehouse/delta), loaded with
#   Delta's jars (spark.jars: its superclass is in delta-storage);
# - lakehouse-hadoop-local.jar: Hadoop's local file system without forks (lakehouse/hadoop), on the
#   driver's class path from its start (spark-submit reads files through it before spark.jars loads).
# PYTHON (default: python3) is one with the engine's pinned pyspark and delta-spark installed: the
# classes compile against their Hadoop and Delta jars (delta-storage from Maven Central).
# The jar is committed: a user's machine needs a JRE only. The integration test
# test_the_shipped_jars_are_built_from_their_source compiles the sources again and compares.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${1:-python3}"
jars="$here/../src/lakehouse_engine/sink/jars"
read -r pyspark_jars delta_version < <("$python" -c '
import importlib.metadata as m, os, pyspark
print(os.path.join(os.path.dirname(pyspark.__file__), "jars"), m.version("delta-spark"))')
hadoop="$(ls "$pyspark_jars"/hadoop-client-api-*.jar | head -1)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
storage="$work/delta-storage-$delta_version.jar"
curl -fsSL -o "$storage" "https://repo1.maven.org/maven2/io/delta/delta-storage/$delta_version/delta-storage-$delta_version.jar"
mkdir "$work/classes"
javac -Xlint:all -Werror --release 17 -cp "$storage:$hadoop" -d "$work/classes" $(find "$here/lakehouse" -name '*.java')
mkdir -p "$jars"
# Entries in a fixed order with a fixed time, so the same classes give the same jar.
for package in delta:lakehouse-delta-logstore hadoop:lakehouse-hadoop-local; do
  jar="$jars/${package#*:}.jar"
  (cd "$work/classes" && find "lakehouse/${package%%:*}" -name '*.class' | sort > "../${package%%:*}.entries" &&
    jar --create --file "$jar" --no-manifest --date=2026-01-01T00:00:00Z "@../${package%%:*}.entries")
  echo "built $jar"
done
