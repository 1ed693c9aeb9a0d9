package lakehouse.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system without a process per permission change or rename.
 *
 * <p>Without Hadoop's native library (pip's pyspark ships none) {@code RawLocalFileSystem}
 * runs {@code chmod} for every file and folder it creates with a permission, and
 * {@code readlink} for every {@code getFileLinkStatus}, which every rename asks of both its
 * paths. A Delta commit on a local lake creates and renames its commit file and its checksum:
 * a 500k-change catch-up ran some 350 such processes from the driver. Here a permission is set
 * with {@code java.nio} and a path that is not a symbolic link gets its status without asking
 * for a link target; anything else (a sticky bit, a symbolic link, a file system without POSIX
 * permissions) is left to Hadoop's own code. Same results, no process.
 *
 * <p>Built into the engine's package by {@code engine/java/build.sh}.
 */
public class NoForkRawLocalFileSystem extends RawLocalFileSystem {

  private static final PosixFilePermission[] BITS = {
    PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
    PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
    PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
  };
  private static final int STICKY = 01000;

  @Override
  public void setPermission(Path p, FsPermission permission) throws IOException {
    short mode = permission.toShort();
    if ((mode & STICKY) != 0) {
      super.setPermission(p, permission); // java.nio cannot set the sticky bit
      return;
    }
    try {
      Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(mode));
    } catch (UnsupportedOperationException notPosix) {
      super.setPermission(p, permission);
    }
  }

  @Override
  public FileStatus getFileLinkStatus(Path f) throws IOException {
    if (Files.isSymbolicLink(pathToFile(f).toPath())) {
      return super.getFileLinkStatus(f); // Hadoop's own answer, with its qualified target
    }
    // What Hadoop returns for a path whose link target is empty (a file, a folder, or nothing:
    // FileNotFoundException).
    return getFileStatus(f);
  }

  static Set<PosixFilePermission> posix(int mode) {
    Set<PosixFilePermission> wanted = EnumSet.noneOf(PosixFilePermission.class);
    for (int bit = 0; bit < BITS.length; bit++) {
      if ((mode & (1 << bit)) != 0) {
        wanted.add(BITS[bit]);
      }
    }
    return wanted;
  }
}
