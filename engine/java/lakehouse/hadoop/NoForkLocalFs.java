package lakehouse.hadoop;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.local.LocalConfigKeys;

/**
 * Hadoop's {@code file:} {@code AbstractFileSystem} (what {@code FileContext} uses: Delta's log
 * store and Spark's checkpoint files) over {@link NoForkRawLocalFileSystem}, as
 * {@code org.apache.hadoop.fs.local.LocalFs} is over {@code RawLocalFileSystem}: set as
 * {@code fs.AbstractFileSystem.file.impl}.
 */
public class NoForkLocalFs extends ChecksumFs {

  public NoForkLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
    super(new Raw(conf));
  }

  /** {@code org.apache.hadoop.fs.local.RawLocalFs}, whose constructor is not public. */
  static final class Raw extends DelegateToFileSystem {

    Raw(Configuration conf) throws IOException, URISyntaxException {
      super(FsConstants.LOCAL_FS_URI, new NoForkRawLocalFileSystem(), conf,
          FsConstants.LOCAL_FS_URI.getScheme(), false);
    }

    @Override
    public int getUriDefaultPort() {
      return -1; // no port
    }

    @Override
    public FsServerDefaults getServerDefaults(Path f) throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    @Deprecated
    public FsServerDefaults getServerDefaults() throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    public boolean isValidName(String src) {
      return true; // local names have no further restrictions
    }
  }
}
