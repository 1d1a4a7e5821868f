// X500Name prints what ZooKeeper's X509AuthenticationProvider takes as a
// certificate's x509 id: getSubjectX500Principal().getName(), Java's RFC 2253
// form. server/x509name_test.go runs it (java X500Name.java) to check
// x509ID against the JDK.
//
// Input, one per line on stdin: "cert <hex of a DER certificate>" or
// "name <hex of a DER Name>". Output, one line per input line: the hex of
// the name's UTF-8 bytes (hex, so that control characters in a name cannot
// break the lines), or "error <message>".
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.HexFormat;
import javax.security.auth.x500.X500Principal;

public class X500Name {
    public static void main(String[] args) throws Exception {
        CertificateFactory cf = CertificateFactory.getInstance("X.509");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        HexFormat hex = HexFormat.of();
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.trim().split(" ", 2);
            if (f.length != 2) {
                continue;
            }
            try {
                byte[] der = hex.parseHex(f[1]);
                X500Principal p;
                if (f[0].equals("cert")) {
                    X509Certificate c = (X509Certificate) cf.generateCertificate(new ByteArrayInputStream(der));
                    p = c.getSubjectX500Principal();
                } else {
                    p = new X500Principal(der);
                }
                System.out.println(hex.formatHex(p.getName().getBytes(StandardCharsets.UTF_8)));
            } catch (Exception e) {
                System.out.println("error " + e.toString().replace('\n', ' '));
            }
        }
    }
}
