package lakehouse.hadoop;

import org.apache.hadoop.fs.LocalFileSystem;

/**
 * Hadoop's {@code file:} file system (checksummed, as {@code LocalFileSystem}) over
 * {@link NoForkRawLocalFileSystem}: set as {@code fs.file.impl}.
 */
public class NoForkLocalFileSystem extends LocalFileSystem {

  public NoForkLocalFileSystem() {
    super(new NoForkRawLocalFileSystem());
  }
}
